package dev.redlockd.client;

import io.grpc.Status;

/** UNAVAILABLE: too few masters answered (or the daemon is unreachable); nothing is left locked by the call, so it is safe to retry. */
public class UnavailableException extends RedlockdException {
  private static final long serialVersionUID = 1L;

  /** See {@link RedlockdException#RedlockdException(String, Status.Code, String, Throwable)}. */
  public UnavailableException(String message, Status.Code code, String details, Throwable cause) {
    super(message, code, details, cause);
  }

  @Override
  public String kind() {
    return "unavailable";
  }

  @Override
  public boolean isRetryable() {
    return true;
  }
}
