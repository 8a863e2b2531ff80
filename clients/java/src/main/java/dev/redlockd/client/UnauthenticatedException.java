package dev.redlockd.client;

import io.grpc.Status;

/** UNAUTHENTICATED: no bearer token (or client certificate), or one that no configured client has. */
public class UnauthenticatedException extends RedlockdException {
  private static final long serialVersionUID = 1L;

  /** See {@link RedlockdException#RedlockdException(String, Status.Code, String, Throwable)}. */
  public UnauthenticatedException(String message, Status.Code code, String details, Throwable cause) {
    super(message, code, details, cause);
  }

  @Override
  public String kind() {
    return "unauthenticated";
  }

}
