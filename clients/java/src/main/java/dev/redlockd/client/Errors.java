package dev.redlockd.client;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;

/** Maps gRPC statuses to this library's exception types (one per outcome). */
final class Errors {
  private Errors() {}

  /** The exception for a failed call named {@code what}; non-gRPC throwables are wrapped as is. */
  static RedlockdException fromThrowable(Throwable error, String what) {
    if (error instanceof RedlockdException) {
      return (RedlockdException) error;
    }
    Status status = Status.fromThrowable(error);
    return fromStatus(status, what, error);
  }

  /** The exception for {@code status}, as returned by a call named {@code what}. */
  static RedlockdException fromStatus(Status status, String what, Throwable cause) {
    Status.Code code = status.getCode();
    String details = status.getDescription() == null ? "" : status.getDescription();
    String message = what + ": " + code + ": " + details;
    Throwable why = cause == null ? new StatusRuntimeException(status) : cause;
    switch (code) {
      case ABORTED:
        return new LockHeldException(message, code, details, why);
      case FAILED_PRECONDITION:
        return new LockNotHeldException(message, code, details, why);
      case UNAVAILABLE:
        return new UnavailableException(message, code, details, why);
      case DEADLINE_EXCEEDED:
        return new DeadlineExceededException(message, code, details, why);
      case INVALID_ARGUMENT:
        return new InvalidArgumentException(message, code, details, why);
      case RESOURCE_EXHAUSTED:
        return new ResourceExhaustedException(message, code, details, why);
      case UNAUTHENTICATED:
        return new UnauthenticatedException(message, code, details, why);
      case PERMISSION_DENIED:
        return new PermissionDeniedException(message, code, details, why);
      default:
        return new RedlockdException(message, code, details, why);
    }
  }
}
