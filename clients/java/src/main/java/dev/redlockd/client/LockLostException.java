package dev.redlockd.client;

import io.grpc.Status;

/**
 * The lock of a Hold session is gone, or no longer guaranteed: the daemon sent {@code lost} or a
 * {@code released} nobody asked for, the stream ended or broke, or no extension arrived before the
 * last known validity ran out. {@link #reason()} says which. Work done under the lock must stop.
 */
public class LockLostException extends RedlockdException {
  private static final long serialVersionUID = 1L;

  private final String reason;

  /**
   * @param message what happened, for people
   * @param code FAILED_PRECONDITION, or the stream's status code when it broke
   * @param details the message
   * @param reason why the lock is gone (short, stable wording)
   * @param cause the gRPC exception, if any
   */
  public LockLostException(
      String message, Status.Code code, String details, String reason, Throwable cause) {
    super(message, code, details, cause);
    this.reason = reason;
  }

  /** Why the lock is gone, e.g. {@code lost: ...} or {@code released by the daemon, unrequested}. */
  public String reason() {
    return reason;
  }

  @Override
  public String kind() {
    return "lost";
  }
}
