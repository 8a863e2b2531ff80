import dev.redlockd.client.Leadership;
import dev.redlockd.client.LockClient;
import dev.redlockd.client.LockLostException;
import dev.redlockd.client.RedlockdException;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

/**
 * The Java candidate of the take-over run (clients/takeover/harness.py), run by the source launcher
 * on the classpath of clients/java's build: {@code java -cp CP Candidate.java ADDRESS LOG TTL_MS}.
 *
 * <p>Campaigns for the election {@code takeover} with the value {@code java-<pid>} through {@code
 * LockClient.campaign}; elected, it acts every {@link #ACT_EVERY_MS} ms while {@code
 * leadership.check()} passes, then, once it throws, records the loss and campaigns again, until
 * killed. Every event is one JSON line, one O_APPEND write to LOG, as the Python candidate writes
 * them (clients/takeover/python/candidate.py): campaign, elected (term, t, wall), act (term, t,
 * rem_ms), lost (term, t, reason), error. Times are {@code System.nanoTime()}, which HotSpot on
 * Linux reads from CLOCK_MONOTONIC, the clock the other candidates and the harness read too; an
 * act's t is read before the check that lets it happen.
 */
public final class Candidate {
  private static final String LANG = "java";
  private static final String ELECTION = "takeover";
  /** Time between two acts of a leader. */
  private static final long ACT_EVERY_MS = 50;

  private static FileOutputStream log;
  private static final long PID = ProcessHandle.current().pid();

  private Candidate() {}

  public static void main(String[] args) throws IOException, InterruptedException {
    String address = args[0];
    Duration ttl = Duration.ofMillis(Long.parseLong(args[2]));
    log = new FileOutputStream(args[1], true);
    try (LockClient client = LockClient.builder(address).deadline(Duration.ofSeconds(30)).build()) {
      while (true) {
        write("campaign", "");
        Leadership leadership;
        try {
          leadership = client.campaign(ELECTION, LANG + "-" + PID, ttl);
        } catch (RedlockdException e) {
          write("error", ",\"error\":" + quote(e.getMessage()));
          Thread.sleep(100);
          continue;
        }
        try (leadership) {
          String term = Long.toUnsignedString(leadership.term());
          write("elected", ",\"term\":" + term + ",\"wall\":" + System.currentTimeMillis() / 1000.0);
          while (true) {
            long t = System.nanoTime();
            try {
              leadership.check();
            } catch (LockLostException lost) {
              write("lost", ",\"term\":" + term + ",\"reason\":" + quote(lost.getMessage()));
              break;
            }
            log(
                "{\"ev\":\"act\",\"lang\":\"java\",\"pid\":" + PID + ",\"term\":" + term + ",\"t\":" + t
                    + ",\"rem_ms\":" + leadership.remaining().toMillis() + "}");
            Thread.sleep(ACT_EVERY_MS);
          }
        } catch (RedlockdException e) {
          // close() (resign) of a leadership already lost may fail: campaign again.
          write("error", ",\"error\":" + quote(e.getMessage()));
        }
      }
    }
  }

  private static void write(String event, String fields) throws IOException {
    log(
        "{\"ev\":\"" + event + "\",\"lang\":\"java\",\"pid\":" + PID + ",\"t\":" + System.nanoTime()
            + fields + "}");
  }

  /** One line, one write(2) on a file opened for appending. */
  private static void log(String line) throws IOException {
    log.write((line + "\n").getBytes(StandardCharsets.UTF_8));
  }

  private static String quote(String text) {
    StringBuilder out = new StringBuilder("\"");
    for (char c : String.valueOf(text).toCharArray()) {
      if (c == '"' || c == '\\') {
        out.append('\\').append(c);
      } else if (c < 0x20) {
        out.append(String.format("\\u%04x", (int) c));
      } else {
        out.append(c);
      }
    }
    return out.append('"').toString();
  }
}
