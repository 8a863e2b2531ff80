package dev.redlockd.client;

import io.grpc.Status;

/** FAILED_PRECONDITION: the token no longer holds the lock (it expired, was taken over, or was never held). */
public class LockNotHeldException extends RedlockdException {
  private static final long serialVersionUID = 1L;

  /** See {@link RedlockdException#RedlockdException(String, Status.Code, String, Throwable)}. */
  public LockNotHeldException(String message, Status.Code code, String details, Throwable cause) {
    super(message, code, details, cause);
  }

  @Override
  public String kind() {
    return "not_held";
  }

}
