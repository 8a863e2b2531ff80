package dev.redlockd.client;

import io.grpc.Status;

/** ABORTED: the resource stayed held by someone else for the whole wait. */
public class LockHeldException extends RedlockdException {
  private static final long serialVersionUID = 1L;

  /** See {@link RedlockdException#RedlockdException(String, Status.Code, String, Throwable)}. */
  public LockHeldException(String message, Status.Code code, String details, Throwable cause) {
    super(message, code, details, cause);
  }

  @Override
  public String kind() {
    return "held";
  }

}
