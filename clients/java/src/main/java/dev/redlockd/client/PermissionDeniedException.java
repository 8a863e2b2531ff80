package dev.redlockd.client;

import io.grpc.Status;

/** PERMISSION_DENIED: the resource is outside the caller's namespaces. */
public class PermissionDeniedException extends RedlockdException {
  private static final long serialVersionUID = 1L;

  /** See {@link RedlockdException#RedlockdException(String, Status.Code, String, Throwable)}. */
  public PermissionDeniedException(String message, Status.Code code, String details, Throwable cause) {
    super(message, code, details, cause);
  }

  @Override
  public String kind() {
    return "permission_denied";
  }

}
