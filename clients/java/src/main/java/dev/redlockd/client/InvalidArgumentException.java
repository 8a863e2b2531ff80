package dev.redlockd.client;

import io.grpc.Status;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * INVALID_ARGUMENT: a malformed request, refused by the daemon or by this client before sending
 * it. {@link #field()} names the offending field.
 */
public class InvalidArgumentException extends RedlockdException {
  private static final long serialVersionUID = 1L;
  private static final Pattern FIELD = Pattern.compile("^([A-Za-z_][\\w.]*): ");

  private final String field;

  /** See {@link RedlockdException#RedlockdException(String, Status.Code, String, Throwable)}. */
  public InvalidArgumentException(String message, Status.Code code, String details, Throwable cause) {
    super(message, code, details, cause);
    // The daemon writes "<field>: <reason>", and so does this client.
    Matcher match = FIELD.matcher(details());
    this.field = match.find() ? match.group(1) : null;
  }

  /** The offending field as the daemon names it ({@code ttl}, {@code resource}), or null. */
  public String field() {
    return field;
  }

  @Override
  public String kind() {
    return "invalid_argument";
  }

  /** A request this client refuses before sending it: {@code field: reason}. */
  static InvalidArgumentException of(String field, String reason) {
    String details = field + ": " + reason;
    return new InvalidArgumentException(details, Status.Code.INVALID_ARGUMENT, details, null);
  }
}
