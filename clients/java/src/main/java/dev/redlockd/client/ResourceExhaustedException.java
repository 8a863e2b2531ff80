package dev.redlockd.client;

import io.grpc.Status;

/** RESOURCE_EXHAUSTED: a configured limit (waiters, sessions, rate) was hit; retry later. */
public class ResourceExhaustedException extends RedlockdException {
  private static final long serialVersionUID = 1L;

  /** See {@link RedlockdException#RedlockdException(String, Status.Code, String, Throwable)}. */
  public ResourceExhaustedException(String message, Status.Code code, String details, Throwable cause) {
    super(message, code, details, cause);
  }

  @Override
  public String kind() {
    return "resource_exhausted";
  }

  @Override
  public boolean isRetryable() {
    return true;
  }
}
