package dev.redlockd.client;

import com.google.gson.Gson;
import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.io.Writer;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Test helper: five real valkey-server masters on free 127.0.0.1 ports and one real redlockd over
 * them, from the test kit's launcher, redlockd-cluster (its protocol:
 * crates/redlockd-testkit/src/bin/redlockd-cluster/main.rs): it starts them, waits until the
 * daemon's health says SERVING, prints one JSON line, then answers commands on its stdin. {@link
 * #start} returns once the daemon serves; {@link #close()} closes the launcher's stdin, which stops
 * everything.
 *
 * <p>Launcher: $REDLOCKD_CLUSTER_BIN, else {@code <repo>/target/debug/redlockd-cluster} (cargo
 * build --workspace --bins). It finds valkey-server ($REDLOCKD_VALKEY_BIN, after {@code source
 * .venv/redlockd-env}) and redlockd ($REDLOCKD_BIN, else the workspace's) itself.
 */
final class Daemon implements AutoCloseable {
  /** Longest wait for one line of the launcher, whose own waits are bounded. */
  static final Duration LINE_LIMIT = Duration.ofSeconds(90);

  /** The masters, in the order given to the daemon. */
  final List<Master> masters = new ArrayList<>();
  /** {@code 127.0.0.1:port} of the daemon. */
  final String address;

  private final Process launcher;
  private final Writer commands;
  private final BufferedReader answers;

  private Daemon(Process launcher) throws IOException {
    this.launcher = launcher;
    this.commands = launcher.outputWriter(StandardCharsets.UTF_8);
    this.answers =
        new BufferedReader(new InputStreamReader(launcher.getInputStream(), StandardCharsets.UTF_8));
    JsonObject started = next();
    this.address = started.getAsJsonObject("daemon").get("addr").getAsString();
    JsonArray ports = started.getAsJsonArray("masters");
    for (int i = 0; i < ports.size(); i++) {
      masters.add(new Master(i, ports.get(i).getAsJsonObject().get("port").getAsInt()));
    }
  }

  /** The repository's root (set by the pom; else two levels above the working directory). */
  static Path repo() {
    String configured = System.getProperty("redlockd.repo");
    Path base = configured != null ? Path.of(configured) : Path.of("..", "..");
    return base.toAbsolutePath().normalize();
  }

  /** A TCP port on 127.0.0.1 that was free a moment ago. */
  static int freePort() {
    try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      return socket.getLocalPort();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Starts masters and a daemon with the default settings. */
  static Daemon start() throws Exception {
    return start(Map.of(), null, List.of());
  }

  /**
   * Starts five masters and a daemon. {@code settings}: extra configuration keys as in
   * config/redlockd.toml ({@code server.tls.cert}); {@code toml}: text of a configuration file
   * (or null); {@code probe}: the launcher's {@code --probe-*} options, the TLS its readiness probe
   * connects with.
   */
  static Daemon start(Map<String, String> settings, String toml, List<String> probe)
      throws Exception {
    String binary = System.getenv("REDLOCKD_CLUSTER_BIN");
    if (binary == null || binary.isEmpty()) {
      binary = repo().resolve("target/debug/redlockd-cluster").toString();
    }
    // Wider than the daemon's default 50ms: the machine running CI is shared and busy.
    List<String> command =
        new ArrayList<>(List.of(binary, "--set", "redlock.node_timeout=250ms"));
    new TreeMap<>(settings).forEach((key, value) -> command.addAll(List.of("--set", key + "=" + value)));
    if (toml != null) {
      command.addAll(List.of("--toml", toml));
    }
    command.addAll(probe);
    Process launcher =
        new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    try {
      return new Daemon(launcher);
    } catch (Exception | AssertionError e) {
      launcher.getOutputStream().close();
      launcher.waitFor(LINE_LIMIT.toSeconds(), TimeUnit.SECONDS);
      launcher.destroyForcibly();
      throw e;
    }
  }

  /** The launcher's next answer; an exception unless it says ok. */
  private JsonObject next() throws IOException {
    CompletableFuture<String> line =
        CompletableFuture.supplyAsync(
            () -> {
              try {
                return answers.readLine();
              } catch (IOException e) {
                throw new UncheckedIOException(e);
              }
            });
    String text;
    try {
      text = line.get(LINE_LIMIT.toMillis(), TimeUnit.MILLISECONDS);
    } catch (TimeoutException e) {
      throw new IOException("redlockd-cluster: no answer within " + LINE_LIMIT, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("interrupted", e);
    } catch (ExecutionException e) {
      throw new IOException("redlockd-cluster's stdout", e.getCause());
    }
    if (text == null) {
      throw new IllegalStateException("redlockd-cluster ended without answering (its stderr says why)");
    }
    JsonObject answer = JsonParser.parseString(text).getAsJsonObject();
    if (!answer.get("ok").getAsBoolean()) {
      throw new IllegalStateException("redlockd-cluster: " + answer.get("error").getAsString());
    }
    return answer;
  }

  /** Sends one command (a JSON array of words) and returns its answer. */
  private synchronized JsonObject ask(String... words) throws IOException {
    commands.write(new Gson().toJson(Arrays.asList(words)) + "\n");
    commands.flush();
    return next();
  }

  /**
   * The address of a proxy to the daemon (the launcher's) that passes the client's bytes at once
   * and delivers the daemon's {@code delay} after it sent them, in order: the daemon grants and
   * answers in time, and its answer arrives after the client's deadline fired.
   */
  String slowAnswers(Duration delay) throws IOException {
    return ask("slow-answers", "0", Long.toString(delay.toMillis())).get("addr").getAsString();
  }

  /** Sends a signal ({@code TERM}, {@code STOP}, {@code CONT}) to the daemon. */
  void signal(String name) throws IOException {
    ask("signal", "0", name);
  }

  /** Completes when the daemon has exited. */
  CompletableFuture<JsonElement> exited() {
    return CompletableFuture.supplyAsync(
        () -> {
          try {
            return ask("wait-daemon", "0").get("exit");
          } catch (IOException e) {
            throw new UncheckedIOException(e);
          }
        });
  }

  @Override
  public void close() {
    try {
      commands.close();
      if (!launcher.waitFor(LINE_LIMIT.toSeconds(), TimeUnit.SECONDS)) {
        launcher.destroyForcibly().waitFor();
      }
    } catch (IOException ignored) {
      launcher.destroyForcibly();
    } catch (InterruptedException e) {
      launcher.destroyForcibly();
      Thread.currentThread().interrupt();
    }
  }

  static String tail(Path log) {
    try {
      List<String> lines = Files.readAllLines(log);
      return String.join("\n", lines.subList(Math.max(0, lines.size() - 20), lines.size()));
    } catch (IOException e) {
      return "(no log: " + e.getMessage() + ")";
    }
  }

  /** One of the launcher's masters. */
  final class Master {
    final int port;
    private final String index;

    Master(int index, int port) {
      this.index = Integer.toString(index);
      this.port = port;
    }

    /** Sends one command over RESP; returns the first reply line. */
    String command(String... args) throws IOException {
      List<String> words = new ArrayList<>(List.of("master", index));
      words.addAll(Arrays.asList(args));
      return ask(words.toArray(String[]::new)).get("reply").getAsString();
    }

    /** Kills the master (SIGKILL): its keys are gone with it. */
    void stop() throws IOException {
      ask("stop-master", index);
    }
  }
}
