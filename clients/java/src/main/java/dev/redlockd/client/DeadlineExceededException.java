package dev.redlockd.client;

import io.grpc.Status;

/**
 * DEADLINE_EXCEEDED: the call's deadline ran out first; nothing is left locked by it (the daemon
 * answered so, or the deadline ran out in the client and {@code acquire} released what its request
 * id may have got).
 */
public class DeadlineExceededException extends RedlockdException {
  private static final long serialVersionUID = 1L;

  /** See {@link RedlockdException#RedlockdException(String, Status.Code, String, Throwable)}. */
  public DeadlineExceededException(String message, Status.Code code, String details, Throwable cause) {
    super(message, code, details, cause);
  }

  @Override
  public String kind() {
    return "deadline_exceeded";
  }

}
