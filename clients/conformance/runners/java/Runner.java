import dev.redlockd.client.DeadlineExceededException;
import dev.redlockd.client.InvalidArgumentException;
import dev.redlockd.client.Leader;
import dev.redlockd.client.Leadership;
import dev.redlockd.client.Lease;
import dev.redlockd.client.Lock;
import dev.redlockd.client.LockClient;
import dev.redlockd.client.LockHeldException;
import dev.redlockd.client.LockLostException;
import dev.redlockd.client.LockNotHeldException;
import dev.redlockd.client.Observation;
import dev.redlockd.client.PermissionDeniedException;
import dev.redlockd.client.RedlockdException;
import dev.redlockd.client.ResourceExhaustedException;
import dev.redlockd.client.UnauthenticatedException;
import dev.redlockd.client.UnavailableException;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BooleanSupplier;

/**
 * The Java client's conformance runner: runs clients/conformance/scenarios.json through the
 * redlockd-client library's public API (LockClient, Lease, Leadership, Observation, one exception
 * type per outcome).
 *
 * <p>Usage: {@code java -cp <client and its dependencies> Runner.java SCENARIOS ENV} (started by
 * clients/conformance/harness.py through run.sh; the harness's docstring describes ENV and the
 * line protocol on stdout/stdin). Needs nothing beyond the client's own classpath: the JSON reader
 * is the small one at the end of this file.
 */
public final class Runner {
  /** How long a step that waits for an outcome may take by default. */
  private static final Duration STEP_LIMIT = Duration.ofSeconds(30);

  /** A step observed something other than what the scenario says. */
  static final class Failure extends Exception {
    private static final long serialVersionUID = 1L;

    Failure(String message) {
      super(message);
    }
  }

  private final Map<String, Object> env;
  private final Map<String, LockClient> clients = new HashMap<>();
  private final BufferedReader answers =
      new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));

  // One scenario's state.
  private final Map<String, Lock> locks = new HashMap<>();
  private final Map<String, Lease> leases = new HashMap<>();
  private final Map<String, CompletableFuture<Lock>> pending = new HashMap<>();
  private final Map<String, CompletableFuture<Lease>> pendingLeases = new HashMap<>();
  private final Map<String, Long> fences = new HashMap<>();
  // Elections, by the steps' names (a leadership's term is in fences).
  private final Map<String, Leadership> leaderships = new HashMap<>();
  private final Map<String, CompletableFuture<Leadership>> candidates = new HashMap<>();
  private final Map<String, Observation> observations = new HashMap<>();
  private final Map<String, BlockingQueue<Object>> observed = new HashMap<>();
  // The last leader each observation yielded, as {term, value_version} (null before the first).
  private final Map<String, long[]> lastObserved = new HashMap<>();

  Runner(Map<String, Object> env) {
    this.env = env;
  }

  static String kindOf(Throwable error) {
    if (error instanceof LockHeldException) return "held_elsewhere";
    if (error instanceof LockNotHeldException) return "not_held";
    if (error instanceof UnavailableException) return "unavailable";
    if (error instanceof DeadlineExceededException) return "deadline";
    if (error instanceof InvalidArgumentException) return "invalid_argument";
    if (error instanceof ResourceExhaustedException) return "resource_exhausted";
    if (error instanceof UnauthenticatedException) return "unauthenticated";
    if (error instanceof PermissionDeniedException) return "permission_denied";
    if (error instanceof LockLostException) return "lost";
    return "other(" + error + ")";
  }

  @SuppressWarnings("unchecked")
  LockClient client(String name) throws Failure {
    LockClient existing = clients.get(name);
    if (existing != null) return existing;
    Map<String, Object> spec = (Map<String, Object>) ((Map<String, Object>) env.get("clients")).get(name);
    if (spec == null) throw new Failure("unknown client " + name);
    LockClient.Builder builder = LockClient.builder((String) spec.get("address"));
    if (spec.get("token") != null) builder.token((String) spec.get("token"));
    if (spec.get("ca_file") != null) builder.trustCertificates(Path.of((String) spec.get("ca_file")));
    else if (Boolean.TRUE.equals(spec.get("tls"))) builder.tls();
    LockClient client = builder.build();
    clients.put(name, client);
    return client;
  }

  String resource(Map<String, Object> step) {
    return ((String) step.get("resource")).replace("{prefix}", (String) env.get("prefix"));
  }

  static Duration ms(Map<String, Object> step, String key) {
    return Duration.ofMillis(((Number) step.get(key)).longValue());
  }

  static Duration within(Map<String, Object> step) {
    return step.containsKey("within_ms") ? ms(step, "within_ms") : STEP_LIMIT;
  }

  interface Call<T> {
    T run() throws Exception;
  }

  /** Runs {@code call}; checks the error the step expects, or that there is none (then null). */
  static <T> T outcome(Map<String, Object> step, Call<T> call) throws Exception {
    String expected = (String) step.get("error");
    T value;
    try {
      value = call.run();
    } catch (RedlockdException error) {
      String got = kindOf(error);
      if (expected == null) throw new Failure("expected success, got " + got + ": " + error);
      if (!got.equals(expected)) throw new Failure("expected " + expected + ", got " + got + ": " + error);
      if (step.containsKey("field")) {
        String field = error instanceof InvalidArgumentException ? ((InvalidArgumentException) error).field() : null;
        if (!step.get("field").equals(field)) {
          throw new Failure("expected field " + step.get("field") + ", got " + field + " (" + error + ")");
        }
      }
      return null;
    }
    if (expected != null && !Boolean.TRUE.equals(step.get("may_succeed"))) {
      throw new Failure("expected " + expected + ", got success");
    }
    return value;
  }

  long fenceOf(Object ref) throws Failure {
    if (ref instanceof Number) return ((Number) ref).longValue();
    Long fence = fences.get((String) ref);
    if (fence == null) throw new Failure("no fence saved as " + ref);
    return fence;
  }

  void checkFence(Map<String, Object> step, long fence) throws Failure {
    // Fences are unsigned 64-bit: compare as such.
    if (step.containsKey("fence_above")) {
      long floor = fenceOf(step.get("fence_above"));
      if (Long.compareUnsigned(fence, floor) <= 0) {
        throw new Failure("fence " + Long.toUnsignedString(fence) + " not above " + Long.toUnsignedString(floor));
      }
    }
    if (step.containsKey("fence_equal")) {
      long other = fenceOf(step.get("fence_equal"));
      if (fence != other) throw new Failure("fence " + fence + " differs from " + other);
    }
  }

  void checkLock(Map<String, Object> step, Lock lock) throws Failure {
    checkFence(step, lock.fence());
    if (step.containsKey("save")) {
      locks.put((String) step.get("save"), lock);
      fences.put((String) step.get("save"), lock.fence());
    }
  }

  Lock acquire(Map<String, Object> step) throws Failure {
    LockClient client = client((String) step.get("client"));
    if (step.containsKey("deadline_ms")) client = client.withDeadline(ms(step, "deadline_ms"));
    Duration wait = step.containsKey("wait_ms") ? ms(step, "wait_ms") : Duration.ZERO;
    return client.acquire(resource(step), ms(step, "ttl_ms"), wait);
  }

  Lease hold(Map<String, Object> step) throws Failure {
    LockClient client = client((String) step.get("client"));
    LockClient bounded = client.withDeadline(step.containsKey("deadline_ms") ? ms(step, "deadline_ms") : STEP_LIMIT);
    Duration wait = step.containsKey("wait_ms") ? ms(step, "wait_ms") : Duration.ZERO;
    return bounded.hold(resource(step), ms(step, "ttl_ms"), wait);
  }

  static void until(Duration limit, String what, BooleanSupplier done) throws Exception {
    long deadline = System.nanoTime() + limit.toNanos();
    while (!done.getAsBoolean()) {
      if (System.nanoTime() - deadline > 0) throw new Failure(what + " not within " + limit);
      Thread.sleep(10);
    }
  }

  void step(Map<String, Object> step) throws Exception {
    String op = (String) step.get("op");
    switch (op) {
      case "acquire": {
        Lock lock = outcome(step, () -> acquire(step));
        if (lock != null && Boolean.TRUE.equals(step.get("may_succeed"))) {
          // Granted after all (the race went the other way): released at once, so that the step
          // leaves nothing held either way.
          if (!client((String) step.get("client")).release(lock)) {
            throw new Failure("the lock granted was no longer held when released");
          }
        } else if (lock != null) {
          checkLock(step, lock);
        }
        return;
      }
      case "acquire_async": {
        CompletableFuture<Lock> future = new CompletableFuture<>();
        Thread thread =
            new Thread(
                () -> {
                  try {
                    future.complete(acquire(step));
                  } catch (Throwable error) {
                    future.completeExceptionally(error);
                  }
                });
        thread.setDaemon(true);
        thread.start();
        pending.put((String) step.get("pending"), future);
        return;
      }
      case "await": {
        CompletableFuture<Lock> future = pending.get((String) step.get("pending"));
        Lock lock =
            outcome(
                step,
                () -> {
                  try {
                    return future.get(within(step).toMillis(), TimeUnit.MILLISECONDS);
                  } catch (java.util.concurrent.ExecutionException error) {
                    if (error.getCause() instanceof Exception) throw (Exception) error.getCause();
                    throw error;
                  } catch (TimeoutException error) {
                    throw new Failure("the pending call did not finish within " + within(step));
                  }
                });
        if (lock != null) checkLock(step, lock);
        return;
      }
      case "extend": {
        LockClient client = client((String) step.get("client"));
        Lock old = locks.get((String) step.get("lock"));
        Lock lock = outcome(step, () -> client.extend(old, ms(step, "ttl_ms")));
        if (lock != null) checkLock(step, lock);
        return;
      }
      case "release": {
        LockClient client = client((String) step.get("client"));
        Lock lock = locks.get((String) step.get("lock"));
        Boolean wasHeld = outcome(step, () -> client.release(lock));
        if (wasHeld != null && step.containsKey("was_held") && !step.get("was_held").equals(wasHeld)) {
          throw new Failure("was_held " + wasHeld + ", expected " + step.get("was_held"));
        }
        return;
      }
      case "validate": {
        LockClient client = client((String) step.get("client"));
        Lock lock = locks.get((String) step.get("lock"));
        Boolean held = outcome(step, () -> client.validate(lock).held());
        if (held != null && step.containsKey("held") && !step.get("held").equals(held)) {
          throw new Failure("held " + held + ", expected " + step.get("held"));
        }
        return;
      }
      case "wait_expired": {
        LockClient client = client((String) step.get("client"));
        Lock lock = locks.get((String) step.get("lock"));
        until(within(step), "expiry", () -> !client.validate(lock).held());
        return;
      }
      case "hold": {
        Lease lease = outcome(step, () -> hold(step));
        if (lease != null) {
          leases.put((String) step.get("lease"), lease);
          fences.put((String) step.get("lease"), lease.fence());
          checkFence(step, lease.fence());
        }
        return;
      }
      case "hold_async": {
        CompletableFuture<Lease> future = new CompletableFuture<>();
        Thread thread =
            new Thread(
                () -> {
                  try {
                    future.complete(hold(step));
                  } catch (Throwable error) {
                    future.completeExceptionally(error);
                  }
                });
        thread.setDaemon(true);
        thread.start();
        pendingLeases.put((String) step.get("pending"), future);
        return;
      }
      case "await_hold": {
        CompletableFuture<Lease> future = pendingLeases.get((String) step.get("pending"));
        Lease lease =
            outcome(
                step,
                () -> {
                  try {
                    return future.get(within(step).toMillis(), TimeUnit.MILLISECONDS);
                  } catch (java.util.concurrent.ExecutionException error) {
                    if (error.getCause() instanceof Exception) throw (Exception) error.getCause();
                    throw error;
                  } catch (TimeoutException error) {
                    throw new Failure("the pending session was not granted or refused within " + within(step));
                  }
                });
        if (lease != null) {
          leases.put((String) step.get("lease"), lease);
          fences.put((String) step.get("lease"), lease.fence());
          checkFence(step, lease.fence());
        }
        return;
      }
      case "check": {
        Lease lease = leases.get((String) step.get("lease"));
        outcome(
            step,
            () -> {
              lease.check();
              return Boolean.TRUE;
            });
        return;
      }
      case "release_lease": {
        Lease lease = leases.remove((String) step.get("lease"));
        Boolean wasHeld = outcome(step, lease::release);
        if (wasHeld != null && step.containsKey("was_held") && !step.get("was_held").equals(wasHeld)) {
          throw new Failure("was_held " + wasHeld + ", expected " + step.get("was_held"));
        }
        return;
      }
      case "await_lost": {
        Lease lease = leases.get((String) step.get("lease"));
        try {
          lease.lost().get(within(step).toMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException error) {
          throw new Failure("lost not within " + within(step));
        }
        return;
      }
      case "await_draining": {
        Lease lease = leases.get((String) step.get("lease"));
        until(within(step), "draining", lease::draining);
        return;
      }
      case "campaign":
      case "campaign_async":
      case "expect_not_elected":
      case "await_elected":
      case "expect_term_above":
      case "leader":
      case "resign":
      case "resign_token":
      case "proclaim":
      case "await_leadership_lost":
      case "observe":
      case "observe_next":
      case "close_observation":
        electionStep(op, step);
        return;
      case "pause":
        Thread.sleep(((Number) step.get("ms")).longValue());
        return;
      case "fault": {
        System.out.println("FAULT " + step.get("name"));
        System.out.flush();
        String answer = answers.readLine();
        if (!"ok".equals(answer == null ? null : answer.trim())) {
          throw new Failure("the harness could not inject " + step.get("name") + ": " + answer);
        }
        return;
      }
      default:
        throw new Failure("unknown op " + op);
    }
  }

  @SuppressWarnings("unchecked")
  void run(Map<String, Object> scenario) throws Exception {
    locks.clear();
    leases.clear();
    pending.clear();
    pendingLeases.clear();
    fences.clear();
    leaderships.clear();
    candidates.clear();
    observations.clear();
    observed.clear();
    lastObserved.clear();
    try {
      List<Object> steps = (List<Object>) scenario.get("steps");
      for (int i = 0; i < steps.size(); i++) {
        Map<String, Object> step = (Map<String, Object>) steps.get(i);
        try {
          step(step);
        } catch (Exception error) {
          throw new Failure("step " + i + " (" + step.get("op") + "): " + error.getMessage());
        }
      }
    } finally {
      for (Lease lease : leases.values()) {
        try {
          lease.close();
        } catch (RuntimeException ignored) {
          // Cleanup only: the scenario's outcome is already decided.
        }
      }
      for (Leadership leadership : leaderships.values()) {
        try {
          leadership.close();
        } catch (RuntimeException ignored) {
          // Cleanup only.
        }
      }
      // A candidacy still waiting gives up within its timeout (STEP_LIMIT); one elected by then
      // resigns.
      for (CompletableFuture<Leadership> candidate : candidates.values()) {
        candidate.thenAccept(Leadership::close);
      }
      for (Observation observation : observations.values()) observation.close();
    }
  }

  String election(Map<String, Object> step) {
    return ((String) step.get("name")).replace("{prefix}", (String) env.get("prefix"));
  }

  Leadership campaign(Map<String, Object> step, Duration timeout) throws Failure {
    LockClient client = client((String) step.get("client"));
    String value = step.containsKey("value") ? (String) step.get("value") : "";
    return client.campaign(election(step), value, ms(step, "ttl_ms"), timeout);
  }

  /** Records a leadership under the step's {@code as}; checks {@code term_above}. */
  void elected(Map<String, Object> step, Leadership leadership) throws Failure {
    leaderships.put((String) step.get("as"), leadership);
    fences.put((String) step.get("as"), leadership.term());
    if (step.containsKey("term_above")) {
      long floor = fenceOf(step.get("term_above"));
      if (Long.compareUnsigned(leadership.term(), floor) <= 0) {
        throw new Failure("term " + Long.toUnsignedString(leadership.term()) + " not above " + floor);
      }
    }
  }

  /** Checks {@code none}, or {@code value} and {@code term} (a leadership's name or a number). */
  void checkLeader(Map<String, Object> step, Optional<Leader> leader) throws Failure {
    if (Boolean.TRUE.equals(step.get("none"))) {
      if (leader.isPresent()) throw new Failure("expected no leader, got " + leader.get());
      return;
    }
    if (leader.isEmpty()) throw new Failure("expected a leader, got none");
    if (step.containsKey("value") && !step.get("value").equals(leader.get().value())) {
      throw new Failure("leader value " + leader.get().value() + ", expected " + step.get("value"));
    }
    if (step.containsKey("term") && leader.get().term() != fenceOf(step.get("term"))) {
      throw new Failure("leader term " + leader.get().term() + ", expected " + fenceOf(step.get("term")));
    }
  }

  static void checkWasLeader(Map<String, Object> step, Boolean wasLeader) throws Failure {
    if (wasLeader != null && step.containsKey("was_leader") && !step.get("was_leader").equals(wasLeader)) {
      throw new Failure("was_leader " + wasLeader + ", expected " + step.get("was_leader"));
    }
  }

  static <T> T await(CompletableFuture<T> future, Duration limit, String what) throws Exception {
    try {
      return future.get(limit.toMillis(), TimeUnit.MILLISECONDS);
    } catch (java.util.concurrent.ExecutionException error) {
      if (error.getCause() instanceof Exception) throw (Exception) error.getCause();
      throw error;
    } catch (TimeoutException error) {
      throw new Failure(what + " not within " + limit);
    }
  }

  void electionStep(String op, Map<String, Object> step) throws Exception {
    switch (op) {
      case "campaign": {
        Duration timeout = step.containsKey("deadline_ms") ? ms(step, "deadline_ms") : STEP_LIMIT;
        Leadership leadership =
            outcome(
                step,
                () -> {
                  Leadership won = campaign(step, timeout);
                  // Resigned at the scenario's end even if the step expected an error.
                  leaderships.put((String) step.get("as"), won);
                  return won;
                });
        if (leadership != null) elected(step, leadership);
        return;
      }
      case "campaign_async": {
        CompletableFuture<Leadership> future = new CompletableFuture<>();
        Thread thread =
            new Thread(
                () -> {
                  try {
                    future.complete(campaign(step, STEP_LIMIT));
                  } catch (Throwable error) {
                    future.completeExceptionally(error);
                  }
                });
        thread.setDaemon(true);
        thread.start();
        candidates.put((String) step.get("pending"), future);
        return;
      }
      case "expect_not_elected": {
        CompletableFuture<Leadership> future = candidates.get((String) step.get("pending"));
        try {
          Leadership leadership = future.get(ms(step, "for_ms").toMillis(), TimeUnit.MILLISECONDS);
          throw new Failure("elected while another leads: " + leadership);
        } catch (java.util.concurrent.ExecutionException error) {
          throw new Failure("the candidacy failed: " + kindOf(error.getCause()));
        } catch (TimeoutException expected) {
          return;
        }
      }
      case "await_elected": {
        CompletableFuture<Leadership> future = candidates.get((String) step.get("pending"));
        Leadership leadership = outcome(step, () -> await(future, within(step), "the pending candidate's election"));
        candidates.remove((String) step.get("pending"));
        if (leadership != null) elected(step, leadership);
        return;
      }
      case "expect_term_above": {
        long term = fenceOf(step.get("leadership"));
        long floor = fenceOf(step.get("than"));
        if (Long.compareUnsigned(term, floor) <= 0) {
          throw new Failure("term " + Long.toUnsignedString(term) + " not above " + Long.toUnsignedString(floor));
        }
        return;
      }
      case "leader": {
        LockClient client = client((String) step.get("client"));
        Optional<Leader> leader = outcome(step, () -> client.leader(election(step)));
        if (leader != null) checkLeader(step, leader);
        return;
      }
      case "resign": {
        Leadership leadership = leaderships.remove((String) step.get("leadership"));
        checkWasLeader(step, outcome(step, leadership::resign));
        return;
      }
      case "resign_token": {
        LockClient client = client((String) step.get("client"));
        Leadership leadership = leaderships.get((String) step.get("leadership"));
        checkWasLeader(step, outcome(step, () -> client.resign(election(step), leadership.token())));
        return;
      }
      case "proclaim": {
        // The leadership's own Proclaim (its name, token and term); the refused kind is not_held.
        Leadership leadership = leaderships.get((String) step.get("leadership"));
        Long version = outcome(step, () -> leadership.proclaim((String) step.get("value")));
        if (version != null && version == 0L) {
          throw new Failure("proclaimed with value_version 0, the campaign's own");
        }
        return;
      }
      case "await_leadership_lost": {
        Leadership leadership = leaderships.get((String) step.get("leadership"));
        await(leadership.lost(), within(step), "lost");
        return;
      }
      case "observe": {
        LockClient client = client((String) step.get("client"));
        BlockingQueue<Object> changes = new LinkedBlockingQueue<>();
        Observation observation = client.observe(election(step), changes::add);
        // The end of the observation (an error, or the daemon ending it) is handed to observe_next.
        observation.ended().whenComplete((done, error) -> changes.add(error != null ? error : "ended"));
        observations.put((String) step.get("as"), observation);
        observed.put((String) step.get("as"), changes);
        lastObserved.put((String) step.get("as"), null);
        return;
      }
      case "observe_next": {
        String name = (String) step.get("observation");
        BlockingQueue<Object> changes = observed.get(name);
        long limit = System.nanoTime() + within(step).toNanos();
        while (true) {
          Object next = changes.poll(Math.max(0, limit - System.nanoTime()), TimeUnit.NANOSECONDS);
          if (next == null) throw new Failure("no change observed within " + within(step));
          if (!(next instanceof Optional)) {
            throw new Failure("the observation ended: " + (next instanceof Throwable ? kindOf((Throwable) next) : next));
          }
          @SuppressWarnings("unchecked")
          Optional<Leader> leader = (Optional<Leader>) next;
          if (leader.isPresent()) {
            // (term, value_version) only ever increases along one observation: a new leader, or
            // a value its leader proclaimed since.
            long[] last = lastObserved.get(name);
            long term = leader.get().term();
            long version = leader.get().valueVersion();
            if (last != null) {
              int byTerm = Long.compareUnsigned(term, last[0]);
              if (byTerm < 0 || (byTerm == 0 && Long.compareUnsigned(version, last[1]) <= 0)) {
                throw new Failure(
                    "observed term " + Long.toUnsignedString(term) + " value_version " + Long.toUnsignedString(version)
                        + " after term " + Long.toUnsignedString(last[0]) + " value_version "
                        + Long.toUnsignedString(last[1]));
              }
            }
            lastObserved.put(name, new long[] {term, version});
          }
          if (leader.isEmpty() && Boolean.TRUE.equals(step.get("skip_none")) && !Boolean.TRUE.equals(step.get("none"))) {
            continue;
          }
          checkLeader(step, leader);
          return;
        }
      }
      case "close_observation": {
        observations.remove((String) step.get("observation")).close();
        return;
      }
      default:
        throw new Failure("unknown op " + op);
    }
  }

  @SuppressWarnings("unchecked")
  public static void main(String[] args) throws Exception {
    Map<String, Object> file = (Map<String, Object>) Json.parse(Files.readString(Path.of(args[0])));
    Map<String, Object> env = (Map<String, Object>) Json.parse(Files.readString(Path.of(args[1])));
    Runner runner = new Runner(env);
    int failed = 0;
    for (Object item : (List<Object>) file.get("scenarios")) {
      Map<String, Object> scenario = (Map<String, Object>) item;
      try {
        runner.run(scenario);
        System.out.println("PASS " + scenario.get("id"));
      } catch (Exception error) {
        failed++;
        System.out.println("FAIL " + scenario.get("id") + " " + error.getMessage());
      }
      System.out.flush();
    }
    for (LockClient client : runner.clients.values()) client.close();
    System.exit(failed == 0 ? 0 : 1);
  }

  /** A minimal JSON reader (objects, arrays, strings, numbers as Long/Double, booleans, null). */
  static final class Json {
    private final String text;
    private int at;

    private Json(String text) {
      this.text = text;
    }

    static Object parse(String text) {
      Json json = new Json(text);
      Object value = json.value();
      json.space();
      if (json.at != text.length()) throw json.error("trailing text");
      return value;
    }

    private IllegalArgumentException error(String what) {
      return new IllegalArgumentException("JSON: " + what + " at offset " + at);
    }

    private void space() {
      while (at < text.length() && Character.isWhitespace(text.charAt(at))) at++;
    }

    private Object value() {
      space();
      if (at >= text.length()) throw error("unexpected end");
      char c = text.charAt(at);
      if (c == '{') {
        at++;
        Map<String, Object> object = new LinkedHashMap<>();
        space();
        if (text.charAt(at) == '}') {
          at++;
          return object;
        }
        while (true) {
          space();
          String key = string();
          space();
          expect(':');
          object.put(key, value());
          space();
          if (text.charAt(at) == ',') {
            at++;
          } else {
            expect('}');
            return object;
          }
        }
      }
      if (c == '[') {
        at++;
        List<Object> array = new ArrayList<>();
        space();
        if (text.charAt(at) == ']') {
          at++;
          return array;
        }
        while (true) {
          array.add(value());
          space();
          if (text.charAt(at) == ',') {
            at++;
          } else {
            expect(']');
            return array;
          }
        }
      }
      if (c == '"') return string();
      if (text.startsWith("true", at)) {
        at += 4;
        return Boolean.TRUE;
      }
      if (text.startsWith("false", at)) {
        at += 5;
        return Boolean.FALSE;
      }
      if (text.startsWith("null", at)) {
        at += 4;
        return null;
      }
      int start = at;
      while (at < text.length() && "+-0123456789.eE".indexOf(text.charAt(at)) >= 0) at++;
      String number = text.substring(start, at);
      if (number.isEmpty()) throw error("unexpected character " + c);
      if (number.matches("-?\\d+")) return Long.parseLong(number);
      return Double.parseDouble(number);
    }

    private void expect(char c) {
      if (at >= text.length() || text.charAt(at) != c) throw error("expected " + c);
      at++;
    }

    private String string() {
      expect('"');
      StringBuilder out = new StringBuilder();
      while (true) {
        if (at >= text.length()) throw error("unterminated string");
        char c = text.charAt(at++);
        if (c == '"') return out.toString();
        if (c != '\\') {
          out.append(c);
          continue;
        }
        char e = text.charAt(at++);
        switch (e) {
          case 'n': out.append('\n'); break;
          case 't': out.append('\t'); break;
          case 'r': out.append('\r'); break;
          case 'b': out.append('\b'); break;
          case 'f': out.append('\f'); break;
          case 'u':
            out.append((char) Integer.parseInt(text.substring(at, at + 4), 16));
            at += 4;
            break;
          default: out.append(e);
        }
      }
    }
  }
}
