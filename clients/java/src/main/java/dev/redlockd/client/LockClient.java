package dev.redlockd.client;

import io.grpc.ChannelCredentials;
import io.grpc.Context;
import io.grpc.Deadline;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.StatusRuntimeException;
import io.grpc.TlsChannelCredentials;
import io.grpc.stub.MetadataUtils;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import java.util.Optional;
import redlock.v1.Election.CampaignRequest;
import redlock.v1.Election.LeaderRequest;
import redlock.v1.Election.LeaderResponse;
import redlock.v1.Election.ObserveRequest;
import redlock.v1.Election.ResignRequest;
import redlock.v1.ElectionServiceGrpc;
import redlock.v1.LockOuterClass.AcquireRequest;
import redlock.v1.LockOuterClass.AcquireResponse;
import redlock.v1.LockOuterClass.ExtendRequest;
import redlock.v1.LockOuterClass.ExtendResponse;
import redlock.v1.LockOuterClass.ReleaseRequest;
import redlock.v1.LockOuterClass.ReleaseResponse;
import redlock.v1.LockOuterClass.ValidateRequest;
import redlock.v1.LockOuterClass.ValidateResponse;
import redlock.v1.LockServiceGrpc;

/**
 * A connection to one redlockd daemon (any replica of a deployment): the four unary calls, Hold
 * sessions as {@link Lease}s, and leader election ({@link #campaign}, {@link #leader}, {@link
 * #observe}, {@link #resign}; {@link Leadership#proclaim} from the leader). Thread-safe; make one
 * per process and {@link #close()} it at the end (open sessions are then cancelled, so the daemon
 * releases their locks).
 *
 * <pre>{@code
 * try (LockClient client = LockClient.builder("127.0.0.1:7400").build();
 *     Lease lease = client.hold("orders/42", Duration.ofSeconds(10), Duration.ofSeconds(5))) {
 *   store.write(order, lease.fence());
 *   lease.check(); // throws LockLostException once the lock is gone
 * }
 * }</pre>
 */
public final class LockClient implements AutoCloseable {
  /** Default deadline of a call, beyond the wait it asks for (as in the other clients). */
  public static final Duration DEFAULT_DEADLINE = Duration.ofSeconds(10);

  /** How long the background release of an unanswered acquire may take. */
  static final Duration RELEASE_TIMEOUT = Duration.ofSeconds(1);

  private final Shared shared;
  private final Duration deadline;
  private final Duration totalDeadline;

  private LockClient(Shared shared, Duration deadline, Duration totalDeadline) {
    this.shared = shared;
    this.deadline = deadline;
    this.totalDeadline = totalDeadline;
  }

  /**
   * Starts configuring a client of the daemon at {@code target}: {@code host:port}, {@code
   * http://host:port}, or {@code https://host:port} (TLS with the system's roots, unless {@link
   * Builder#trustCertificates} names a CA).
   */
  public static Builder builder(String target) {
    return new Builder(target);
  }

  /**
   * A view of this client (same connection and sessions) whose every call, and every Hold's wait
   * for its grant, has the total deadline {@code total}, whatever wait it asks for. With a
   * deadline shorter than the wait, the call ends with {@link DeadlineExceededException} and
   * nothing is left locked by it. Closing a view closes the client it came from.
   */
  public LockClient withDeadline(Duration total) {
    Wire.toProto(total, "deadline");
    return new LockClient(shared, deadline, total);
  }

  /** Takes the lock on {@code resource} for {@code ttl}, trying once. See the 3-argument form. */
  public Lock acquire(String resource, Duration ttl) {
    return acquire(resource, ttl, Duration.ZERO);
  }

  /**
   * Takes the lock on {@code resource} for {@code ttl}, waiting up to {@code wait} while someone
   * else holds it (woken by their release). The lock's validity counts from when the request was
   * sent.
   *
   * @throws LockHeldException when it stayed held by someone else for the whole wait
   * @throws UnavailableException when too few masters answered; nothing is locked; retry
   */
  public Lock acquire(String resource, Duration ttl, Duration wait) {
    return acquire(resource, ttl, wait, newRequestId());
  }

  /**
   * The 3-argument form under the caller's own idempotency key: 22 to 64 characters of {@code
   * A-Z a-z 0-9 - _} holding at least 128 random bits (see {@link #newRequestId()}). Retried with
   * the same id, it returns the lock that id already holds instead of {@link LockHeldException}.
   * Keep it secret, like a token.
   *
   * <p>After a deadline or cancellation, nothing is left locked: when the call ends without the
   * daemon's answer (its deadline ran out in the client, the calling thread was interrupted or its
   * gRPC {@link Context} cancelled, the connection broke), the client releases what its request
   * id may have got (the token is derived from it), in the background within a second. When the
   * daemon answered, DEADLINE_EXCEEDED included, it has released any late grant itself. A retry
   * with the same id through this client waits for that release, then acquires anew.
   */
  public Lock acquire(String resource, Duration ttl, Duration wait, String requestId) {
    AcquireRequest request =
        acquireRequest(resource, ttl, wait).toBuilder()
            .setRequestId(Wire.requireString(requestId, "requestId"))
            .build();
    String token = derivedToken(request.getResource(), request.getRequestId());
    shared.awaitRelease(token);
    long sent = Wire.now();
    AcquireResponse answer;
    try {
      answer = blockingStub(wait).acquire(request);
    } catch (StatusRuntimeException failed) {
      if (!answeredByDaemon(failed)) {
        shared.releaseInBackground(request.getResource(), token);
      }
      throw Errors.fromThrowable(failed, "Acquire");
    } catch (RuntimeException | Error failed) {
      shared.releaseInBackground(request.getResource(), token);
      throw failed;
    }
    return Lock.fromWire(answer.getLock(), sent);
  }

  /**
   * The token the daemon gives the lock of {@code requestId} on {@code resource}: the first 128
   * bits, in lowercase hex, of SHA-256("redlockd/v1/token" 0x00 resource 0x00 request_id).
   */
  static String derivedToken(String resource, String requestId) {
    MessageDigest sha256;
    try {
      sha256 = MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException missing) {
      throw new IllegalStateException("every Java platform has SHA-256", missing);
    }
    sha256.update("redlockd/v1/token\0".getBytes(StandardCharsets.UTF_8));
    sha256.update(resource.getBytes(StandardCharsets.UTF_8));
    sha256.update((byte) 0);
    sha256.update(requestId.getBytes(StandardCharsets.UTF_8));
    byte[] digest = sha256.digest();
    return HexFormat.of().formatHex(digest, 0, 16);
  }

  /**
   * Whether a failed call's status is the daemon's own answer rather than one grpc-java made
   * itself (the deadline fired first, the thread was interrupted, the context cancelled, the
   * connection failed). The daemon's status arrives in trailers, which grpc-java hands over with
   * the status (a trailers-only answer keeps at least its content-type); a status grpc-java makes
   * comes with none (it never mixes the two). When unsure, false: a release of a token that holds
   * nothing is harmless.
   */
  static boolean answeredByDaemon(StatusRuntimeException failed) {
    Metadata trailers = failed.getTrailers();
    return trailers != null && !trailers.keys().isEmpty();
  }

  /** How many background releases of unanswered acquires this client started (for tests). */
  long backgroundReleases() {
    return shared.backgroundReleases;
  }

  /**
   * Resets the lock's time to live to {@code ttl} if its token still holds it; a new Lock (same
   * token and fence, validity counted from the send).
   *
   * @throws LockNotHeldException when the token no longer holds the lock
   */
  public Lock extend(Lock lock, Duration ttl) {
    Wire.requireNonNull(lock, "lock");
    ExtendRequest request =
        ExtendRequest.newBuilder()
            .setResource(Wire.requireString(lock.resource(), "resource"))
            .setToken(Wire.requireString(lock.token(), "token"))
            .setTtl(Wire.toProto(ttl, "ttl"))
            .build();
    long sent = Wire.now();
    ExtendResponse answer = call("Extend", Duration.ZERO, stub -> stub.extend(request));
    return Lock.fromWire(answer.getLock(), sent);
  }

  /**
   * Gives the lock up. Returns {@code was_held}: false means it had expired or been taken over
   * first (work done under it may have overlapped another holder's). Idempotent.
   */
  public boolean release(Lock lock) {
    Wire.requireNonNull(lock, "lock");
    ReleaseRequest request =
        ReleaseRequest.newBuilder()
            .setResource(Wire.requireString(lock.resource(), "resource"))
            .setToken(Wire.requireString(lock.token(), "token"))
            .build();
    return call("Release", Duration.ZERO, stub -> stub.release(request)).getWasHeld();
  }

  /**
   * Whether {@code lock} (resource and token) is still the current holder on a majority, and for
   * how long at least (counted from when it was asked), as Chubby's CheckSequencer.
   */
  public Validation validate(Lock lock) {
    Wire.requireNonNull(lock, "lock");
    ValidateRequest request =
        ValidateRequest.newBuilder()
            .setResource(Wire.requireString(lock.resource(), "resource"))
            .setToken(Wire.requireString(lock.token(), "token"))
            .build();
    long sent = Wire.now();
    ValidateResponse answer = call("Validate", Duration.ZERO, stub -> stub.validate(request));
    return new Validation(answer.getHeld(), Wire.fromProto(answer.getValidity()), sent);
  }

  /** Opens a Hold session on {@code resource} for {@code ttl}, trying once. */
  public Lease hold(String resource, Duration ttl) {
    return hold(resource, ttl, Duration.ZERO);
  }

  /**
   * Opens a Hold session and waits (up to {@code wait} while someone else holds it) for the lock.
   * The daemon extends the lock while the session is open. Close the lease (try-with-resources)
   * to release it; watch {@link Lease#lost()} or call {@link Lease#check()} to stop the work once
   * the lock is gone.
   *
   * @throws LockHeldException when it stayed held by someone else for the whole wait
   * @throws DeadlineExceededException when no grant came within the deadline
   */
  public Lease hold(String resource, Duration ttl, Duration wait) {
    AcquireRequest request = acquireRequest(resource, ttl, wait);
    Duration limit = deadlineFor(wait);
    Lease[] self = new Lease[1];
    Lease lease = new Lease(ttl, deadline, shared.scheduler, () -> shared.sessions.remove(self[0]));
    self[0] = lease;
    shared.sessions.add(lease);
    try {
      LockServiceGrpc.newStub(shared.channel).hold(lease.observer());
    } catch (StatusRuntimeException refused) {
      shared.sessions.remove(lease);
      throw Errors.fromThrowable(refused, "Hold");
    }
    lease.start(request);
    return lease.awaitGrant(limit);
  }

  /**
   * Stands as a candidate in the election {@code name} and waits, however long it takes (first
   * come, first served among the candidates), until elected. The daemon keeps the leadership alive
   * while the returned {@link Leadership} is open; close it (try-with-resources) to resign, and
   * watch {@link Leadership#lost()} or call {@link Leadership#check()} to stop acting as leader
   * once it is gone. Interrupting the waiting thread withdraws the candidacy. On a {@link
   * #withDeadline} view, the wait is bounded by the view's deadline.
   *
   * @param name the election's name (as a resource name)
   * @param value what the leader publishes to others: an address, a pod name
   * @param ttl how long a frozen or killed leader keeps the leadership; a standby takes over
   *     within about this
   * @throws UnavailableException when the stream broke or the daemon began stopping before the
   *     election (retryable: campaign again, on another replica if this one is stopping)
   * @throws RedlockdException with status CANCELLED when the thread was interrupted or the client
   *     closed while waiting; the candidacy is withdrawn
   */
  public Leadership campaign(String name, String value, Duration ttl) {
    return campaign(name, value, ttl, totalDeadline);
  }

  /**
   * {@link #campaign(String, String, Duration)}, waiting at most {@code timeout} for the election.
   *
   * @throws DeadlineExceededException when not elected within {@code timeout}; the candidacy is
   *     withdrawn (a leadership won at that instant is given up at once)
   */
  public Leadership campaign(String name, String value, Duration ttl, Duration timeout) {
    CampaignRequest.Start start =
        CampaignRequest.Start.newBuilder()
            .setName(Wire.requireString(name, "name"))
            .setValue(Wire.requireNonNull(value, "value"))
            .setTtl(Wire.toProto(ttl, "ttl"))
            .build();
    if (timeout != null) {
      Wire.toProto(timeout, "timeout");
    }
    Leadership[] self = new Leadership[1];
    Leadership leadership =
        new Leadership(
            ttl,
            deadline,
            shared.scheduler,
            () -> shared.campaigns.remove(self[0]),
            request -> electionCall("Proclaim", stub -> stub.proclaim(request)));
    self[0] = leadership;
    shared.campaigns.add(leadership);
    try {
      ElectionServiceGrpc.newStub(shared.channel).campaign(leadership.observer());
    } catch (StatusRuntimeException refused) {
      shared.campaigns.remove(leadership);
      throw Errors.fromThrowable(refused, "Campaign");
    }
    leadership.start(start);
    return leadership.awaitElected(timeout);
  }

  /**
   * The current leader of the election {@code name}, read from a majority of masters, or empty
   * when it has none.
   */
  public Optional<Leader> leader(String name) {
    LeaderRequest request =
        LeaderRequest.newBuilder().setName(Wire.requireString(name, "name")).build();
    LeaderResponse answer = electionCall("Leader", stub -> stub.leader(request));
    return answer.getHasLeader() ? Optional.of(Leader.fromWire(answer.getLeader())) : Optional.empty();
  }

  /**
   * Observes the election {@code name}: {@code listener} gets its current state first, then each
   * change (a leader of a higher term, a new value of the same term from {@link
   * Leadership#proclaim}, or no leader after one), in (term, value version) order. The returned
   * {@link Observation} runs until closed, until the daemon stops, or until the stream breaks
   * ({@link Observation#ended()}); observe again then.
   */
  public Observation observe(String name, Observation.Listener listener) {
    ObserveRequest request =
        ObserveRequest.newBuilder().setName(Wire.requireString(name, "name")).build();
    Wire.requireNonNull(listener, "listener");
    Observation[] self = new Observation[1];
    Observation observation =
        new Observation(request.getName(), listener, () -> shared.observations.remove(self[0]));
    self[0] = observation;
    shared.observations.add(observation);
    try {
      ElectionServiceGrpc.newStub(shared.channel).observe(request, observation.observer());
    } catch (StatusRuntimeException refused) {
      shared.observations.remove(observation);
      throw Errors.fromThrowable(refused, "Observe");
    }
    return observation;
  }

  /**
   * Ends the leadership proven by {@code token} ({@link Leadership#token()}) from outside its
   * Campaign session: the next candidate may be elected at once, and the session learns it is
   * {@code lost} at its next extension. Returns {@code was_leader}: false when that leadership was
   * already over.
   */
  public boolean resign(String name, String token) {
    ResignRequest request =
        ResignRequest.newBuilder()
            .setName(Wire.requireString(name, "name"))
            .setToken(Wire.requireString(token, "token"))
            .build();
    return electionCall("Resign", stub -> stub.resign(request)).getWasLeader();
  }

  private <T> T electionCall(
      String method, Function<ElectionServiceGrpc.ElectionServiceBlockingStub, T> body) {
    Duration limit = deadlineFor(Duration.ZERO);
    ElectionServiceGrpc.ElectionServiceBlockingStub stub =
        ElectionServiceGrpc.newBlockingStub(shared.channel)
            .withDeadline(Deadline.after(limit.toNanos(), TimeUnit.NANOSECONDS));
    try {
      return body.apply(stub);
    } catch (StatusRuntimeException failed) {
      throw Errors.fromThrowable(failed, method);
    }
  }

  /**
   * Closes the connection. Open sessions are cancelled first: the daemon releases their locks and
   * their {@link Lease#lost()} completes; so are campaigns (leaderships end, candidacies are
   * withdrawn) and observations. The background releases of unanswered acquires finish
   * first (a second at most).
   */
  @Override
  public void close() {
    shared.finishReleases();
    for (Lease lease : shared.sessions) {
      lease.cancel("client closed");
    }
    for (Leadership leadership : shared.campaigns) {
      leadership.cancel("client closed");
    }
    for (Observation observation : shared.observations) {
      observation.cancel("client closed");
    }
    shared.channel.shutdown();
    try {
      if (!shared.channel.awaitTermination(5, TimeUnit.SECONDS)) {
        shared.channel.shutdownNow();
      }
    } catch (InterruptedException interrupted) {
      shared.channel.shutdownNow();
      Thread.currentThread().interrupt();
    }
    shared.scheduler.shutdownNow();
  }

  /** A fresh request id: 128 random bits, URL-safe base64 without padding (22 characters). */
  public static String newRequestId() {
    byte[] bits = new byte[16];
    RANDOM.nextBytes(bits);
    return Base64.getUrlEncoder().withoutPadding().encodeToString(bits);
  }

  private static final SecureRandom RANDOM = new SecureRandom();

  /** Every acquisition carries a request id: a fresh one unless the caller gives its own. */
  private AcquireRequest acquireRequest(String resource, Duration ttl, Duration wait) {
    return AcquireRequest.newBuilder()
        .setResource(Wire.requireString(resource, "resource"))
        .setTtl(Wire.toProto(ttl, "ttl"))
        .setWait(Wire.toProto(wait, "wait"))
        .setOwner(shared.owner)
        .setRequestId(newRequestId())
        .build();
  }

  /** The deadline of a call that waits {@code wait}: the view's total, else wait + default. */
  private Duration deadlineFor(Duration wait) {
    return totalDeadline != null ? totalDeadline : wait.plus(deadline);
  }

  /** A blocking stub whose call has the deadline of a call that waits {@code wait}. */
  private LockServiceGrpc.LockServiceBlockingStub blockingStub(Duration wait) {
    Duration limit = deadlineFor(wait);
    return LockServiceGrpc.newBlockingStub(shared.channel)
        .withDeadline(Deadline.after(limit.toNanos(), TimeUnit.NANOSECONDS));
  }

  private <T> T call(
      String method,
      Duration wait,
      Function<LockServiceGrpc.LockServiceBlockingStub, T> body) {
    LockServiceGrpc.LockServiceBlockingStub stub = blockingStub(wait);
    try {
      return body.apply(stub);
    } catch (StatusRuntimeException failed) {
      throw Errors.fromThrowable(failed, method);
    }
  }

  /** What every view of one client shares: the channel, open sessions, the watchdog timer. */
  private static final class Shared {
    final ManagedChannel channel;
    final String owner;
    final Set<Lease> sessions = ConcurrentHashMap.newKeySet();
    final Set<Leadership> campaigns = ConcurrentHashMap.newKeySet();
    final Set<Observation> observations = ConcurrentHashMap.newKeySet();
    final ScheduledThreadPoolExecutor scheduler;
    /** Background releases of unanswered acquires, by token. */
    private final Map<String, CompletableFuture<Void>> releases = new ConcurrentHashMap<>();
    private boolean closed;
    volatile long backgroundReleases;

    Shared(ManagedChannel channel, String owner) {
      this.channel = channel;
      this.owner = owner;
      this.scheduler =
          new ScheduledThreadPoolExecutor(
              1,
              runnable -> {
                Thread thread = Executors.defaultThreadFactory().newThread(runnable);
                thread.setName("redlockd-lease-watchdog");
                thread.setDaemon(true);
                return thread;
              });
      this.scheduler.setRemoveOnCancelPolicy(true);
    }

    /**
     * Releases what an unanswered acquire may have got, without waiting: bounded by {@link
     * #RELEASE_TIMEOUT}, its outcome ignored (and never logged: the token is a secret). Outside
     * the caller's gRPC context, which may be the cancelled one that ended the acquire.
     */
    void releaseInBackground(String resource, String token) {
      CompletableFuture<Void> done = new CompletableFuture<>();
      synchronized (this) {
        if (closed) {
          return;
        }
        releases.put(token, done);
        backgroundReleases++;
      }
      done.whenComplete((ignored, error) -> releases.remove(token, done));
      ReleaseRequest request =
          ReleaseRequest.newBuilder().setResource(resource).setToken(token).build();
      StreamObserver<ReleaseResponse> observer =
          new StreamObserver<>() {
            @Override
            public void onNext(ReleaseResponse response) {}

            @Override
            public void onError(Throwable error) {
              done.complete(null);
            }

            @Override
            public void onCompleted() {
              done.complete(null);
            }
          };
      try {
        Context.current()
            .fork()
            .run(
                () ->
                    LockServiceGrpc.newStub(channel)
                        .withDeadlineAfter(RELEASE_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS)
                        .release(request, observer));
      } catch (RuntimeException refused) { // the channel is shut down: nothing can be sent
        done.complete(null);
      }
    }

    /**
     * Waits for a background release of {@code token} still under way: a retry with the same
     * request id gets the same token, and must not be released by the call before it.
     */
    void awaitRelease(String token) {
      CompletableFuture<Void> done = releases.get(token);
      if (done != null) {
        awaitQuietly(done);
      }
    }

    /** Lets the releases under way finish and starts no more. */
    void finishReleases() {
      List<CompletableFuture<Void>> pending;
      synchronized (this) {
        closed = true;
        pending = new ArrayList<>(releases.values());
      }
      for (CompletableFuture<Void> done : pending) {
        awaitQuietly(done);
      }
    }

    private static void awaitQuietly(CompletableFuture<Void> done) {
      try {
        done.get(RELEASE_TIMEOUT.toMillis() + 1000, TimeUnit.MILLISECONDS);
      } catch (InterruptedException interrupted) {
        Thread.currentThread().interrupt();
      } catch (ExecutionException | TimeoutException ignored) {
        // Bounded and best effort: the lock expires with its ttl otherwise.
      }
    }
  }

  /** Configures a {@link LockClient}: TLS, mutual TLS, a bearer token, the default deadline. */
  public static final class Builder {
    private static final Metadata.Key<String> AUTHORIZATION =
        Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

    private final String target;
    private boolean tls;
    private Path trustCertificates;
    private Path certificateChain;
    private Path privateKey;
    private String token;
    private String owner = "";
    private Duration deadline = DEFAULT_DEADLINE;

    private Builder(String target) {
      String address = Wire.requireString(target, "target");
      if (address.startsWith("https://")) {
        tls = true;
        address = address.substring("https://".length());
      } else if (address.startsWith("http://")) {
        address = address.substring("http://".length());
      }
      if (address.endsWith("/")) {
        address = address.substring(0, address.length() - 1);
      }
      this.target = Wire.requireString(address, "target");
    }

    /** Connects with TLS, trusting the system's root certificates (unless a CA is named). */
    public Builder tls() {
      this.tls = true;
      return this;
    }

    /** Connects with TLS, trusting the CA certificates in {@code caPem} (a private CA). */
    public Builder trustCertificates(Path caPem) {
      this.trustCertificates = Wire.requireNonNull(caPem, "trustCertificates");
      this.tls = true;
      return this;
    }

    /**
     * Presents a client certificate (mutual TLS): {@code certificateChain} and its PKCS#8 {@code
     * privateKey}, both PEM files. Implies TLS.
     */
    public Builder clientCertificate(Path certificateChain, Path privateKey) {
      this.certificateChain = Wire.requireNonNull(certificateChain, "certificateChain");
      this.privateKey = Wire.requireNonNull(privateKey, "privateKey");
      this.tls = true;
      return this;
    }

    /** Sends {@code authorization: Bearer <token>} with every call and session. */
    public Builder token(String token) {
      this.token = Wire.requireString(token, "token");
      return this;
    }

    /** The caller's free-form identity, for the daemon's logs (never part of a lock's identity). */
    public Builder owner(String owner) {
      this.owner = Wire.requireNonNull(owner, "owner");
      return this;
    }

    /**
     * Deadline of each call beyond the wait it asks for, and how long a lease's release waits for
     * the daemon's answer. Default {@link LockClient#DEFAULT_DEADLINE}.
     */
    public Builder deadline(Duration deadline) {
      Wire.toProto(deadline, "deadline");
      if (deadline.isZero()) {
        throw InvalidArgumentException.of("deadline", "must be positive");
      }
      this.deadline = deadline;
      return this;
    }

    /** Builds the client; the connection is made lazily, on the first call. */
    public LockClient build() {
      ChannelCredentials credentials;
      if (tls) {
        TlsChannelCredentials.Builder builder = TlsChannelCredentials.newBuilder();
        try {
          if (trustCertificates != null) {
            builder.trustManager(trustCertificates.toFile());
          }
          if (certificateChain != null) {
            builder.keyManager(certificateChain.toFile(), privateKey.toFile());
          }
        } catch (IOException | IllegalArgumentException unreadable) {
          throw new InvalidArgumentException(
              "tls: cannot use the certificate files: " + unreadable.getMessage(),
              io.grpc.Status.Code.INVALID_ARGUMENT,
              "tls: cannot use the certificate files: " + unreadable.getMessage(),
              unreadable);
        }
        credentials = builder.build();
      } else {
        credentials = InsecureChannelCredentials.create();
      }
      var channel = Grpc.newChannelBuilder(target, credentials);
      if (token != null) {
        Metadata headers = new Metadata();
        headers.put(AUTHORIZATION, "Bearer " + token);
        channel.intercept(MetadataUtils.newAttachHeadersInterceptor(headers));
      }
      return new LockClient(new Shared(channel.build(), owner), deadline, null);
    }
  }
}
