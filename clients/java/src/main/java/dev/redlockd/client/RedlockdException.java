package dev.redlockd.client;

import io.grpc.Status;

/**
 * Base class of every exception this library throws, so that callers can catch one type. Each
 * outcome the daemon reports as a gRPC status code has its own subclass; {@link #kind()} is the
 * same word in every redlockd client (Python, Node, Go, Java).
 */
public class RedlockdException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final transient Status.Code code;
  private final String details;

  /**
   * @param message what failed, for people
   * @param code the gRPC status code of the outcome
   * @param details the daemon's message, or this client's own
   * @param cause the gRPC exception, if any
   */
  public RedlockdException(String message, Status.Code code, String details, Throwable cause) {
    super(message, cause);
    this.code = code;
    this.details = details == null ? "" : details;
  }

  /** The gRPC status code of the outcome. */
  public Status.Code code() {
    return code;
  }

  /** The daemon's message (or this client's own when it refused a call before sending it). */
  public String details() {
    return details;
  }

  /** A word for the outcome, shared with the other clients' conformance runs. */
  public String kind() {
    return "error";
  }

  /** Whether trying the same call again later may succeed. */
  public boolean isRetryable() {
    return false;
  }
}
