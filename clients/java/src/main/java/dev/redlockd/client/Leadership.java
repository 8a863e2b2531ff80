package dev.redlockd.client;

import io.grpc.Status;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import redlock.v1.Election.CampaignRequest;
import redlock.v1.Election.CampaignResponse;
import redlock.v1.Election.ProclaimRequest;
import redlock.v1.Election.ProclaimResponse;

/**
 * The leadership of an election, won by a Campaign session from {@link LockClient#campaign}. The
 * daemon keeps it alive while the session is open, exactly as a {@link Lease}'s lock (a leadership
 * is a lock, in a key family of its own); this side turns every way it can go away into one
 * signal, {@link #lost()}, so that the leader's work can stop at once:
 *
 * <ul>
 *   <li>the daemon sends {@code lost} (an extension failed, or {@link LockClient#resign} ended the
 *       leadership from outside);
 *   <li>the daemon sends a {@code resigned} nobody asked for (it is stopping);
 *   <li>the stream ends or breaks (daemon gone, connection cut, client closed);
 *   <li>no extension arrived before the last known validity ran out, less {@link
 *       Lease#stopMargin(Duration)} (the daemon or the network went quiet);
 *   <li>the daemon refused a {@link #proclaim(String)}: the term no longer leads;
 *   <li>{@link #resign()} or {@link #close()} gave the leadership up on purpose.
 * </ul>
 *
 * <p>Act as leader only while {@link #check()} passes, and pass {@link #term()} (the leadership's
 * fence) with every write made as leader. {@link #proclaim(String)} changes the value it publishes
 * without giving the term up. Use it in try-with-resources: {@link #close()} resigns. Its {@link
 * #toString()} leaves the token out.
 */
public final class Leadership implements AutoCloseable {
  /** Why the leadership is gone when its validity, less the stop margin, ran out unextended. */
  private static final String EXPIRED = "no extension arrived before the validity ran out";

  private final Duration ttl;
  private final Duration resignTimeout;
  private final ScheduledExecutorService scheduler;
  private final Runnable onFinish;
  /** The client's Proclaim call (its channel, credentials and deadline). */
  private final Function<ProclaimRequest, ProclaimResponse> proclaimCall;
  private final CompletableFuture<Void> elected = new CompletableFuture<>();
  private final CompletableFuture<LockLostException> lost = new CompletableFuture<>();
  private final Object guard = new Object();

  // All below guarded by `guard`.
  private ClientCallStreamObserver<CampaignRequest> requests;
  private boolean cancelled;
  private boolean halfClosed;
  private boolean abandoned;
  private ScheduledFuture<?> watchdog;
  private CompletableFuture<Boolean> resigning;
  private CompletableFuture<Boolean> resigned;
  private long extensions;
  private volatile boolean draining;
  private volatile State state;
  private volatile LockLostException gone;
  // Written under `guard`, so that of two Proclaims answered out of order the newer value stays.
  private volatile Published published;

  /** What the daemon last told of the leadership, its validity placed on the monotonic clock. */
  private record State(
      String name, String value, long term, String token, Duration validity, long validUntilNanos) {}

  /** A value this leader proclaimed, and its version (Leader.value_version) the daemon gave it. */
  private record Published(String value, long version) {}

  Leadership(
      Duration ttl,
      Duration resignTimeout,
      ScheduledExecutorService scheduler,
      Runnable onFinish,
      Function<ProclaimRequest, ProclaimResponse> proclaimCall) {
    this.ttl = ttl;
    this.resignTimeout = resignTimeout;
    this.scheduler = scheduler;
    this.onFinish = onFinish;
    this.proclaimCall = proclaimCall;
  }

  /** The election's name. */
  public String name() {
    return state.name();
  }

  /**
   * The value this leader publishes (what {@link LockClient#leader} shows others): the one it
   * campaigned with, or the last one {@link #proclaim(String)} set.
   */
  public String value() {
    Published last = published;
    return last != null ? last.value() : state.value();
  }

  /**
   * The version of {@link #value()}, as {@link Leader#valueVersion()} shows it: 0 for the value
   * campaigned with, then what the last successful {@link #proclaim(String)} returned.
   */
  public long valueVersion() {
    Published last = published;
    return last != null ? last.version() : 0L;
  }

  /**
   * The leadership's term, its fencing token: strictly greater than every earlier leader's of this
   * election. Pass it with every write made as leader. The contract's uint64: compare with {@link
   * Long#compareUnsigned}.
   */
  public long term() {
    return state.term();
  }

  /**
   * The secret proving this leadership, for {@link LockClient#resign(String, String)} from
   * elsewhere. Never log it.
   */
  public String token() {
    return state.token();
  }

  /** The guaranteed validity the daemon last reported (at the election or the last extension). */
  public Duration validity() {
    return state.validity();
  }

  /** End of the validity on {@link System#nanoTime()}'s clock, counted from the event's arrival. */
  public long validUntilNanos() {
    return state.validUntilNanos();
  }

  /** Guaranteed validity left now (zero once it ran out). */
  public Duration remaining() {
    return Duration.ofNanos(Math.max(0L, state.validUntilNanos() - Wire.now()));
  }

  /**
   * Whether the daemon said it is stopping: the leadership is kept until the drain ends, then lost.
   * Resign, and campaign again on another replica.
   */
  public boolean draining() {
    return draining;
  }

  /** How many extensions ({@code kept}) the daemon has made so far. */
  public long extensions() {
    synchronized (guard) {
      return extensions;
    }
  }

  /**
   * Completes (with the reason) as soon as this process is no longer the leader, or no longer
   * guaranteed to be; never completes exceptionally. Each call returns a new view, so completing or
   * cancelling it does not change the leadership.
   */
  public CompletableFuture<LockLostException> lost() {
    return lost.copy();
  }

  /**
   * Whether the leadership is gone (the same moment {@link #lost()} completes). Like {@link
   * #check()}, it reads the clock itself and ends a leadership whose validity ran out.
   */
  public boolean isLost() {
    return goneNow() != null;
  }

  /**
   * Throws the {@link LockLostException} once the leadership is gone; call it between steps. It
   * compares the clock with the validity (less {@link Lease#stopMargin(Duration)}) itself, and ends
   * a leadership past it at once, as the watchdog timer would.
   * When it is this call that ends it, callbacks registered on {@link #lost()} run on the calling
   * thread before it throws: keep them short (hand long work, or a close, to an executor).
   */
  public void check() {
    LockLostException reason = goneNow();
    if (reason != null) {
      throw reason;
    }
  }

  /**
   * Why the leadership is gone, or null; first ends it if its validity ran out. The watchdog timer
   * alone is not enough: a process paused past the validity (SIGSTOP, a suspended VM, a long GC)
   * resumes with the overdue timer still queued behind it, and must be told at once when it resumes,
   * before it acts on a term a successor may already have replaced, not when the timer thread gets
   * to run.
   */
  private LockLostException goneNow() {
    if (gone == null && lapsed(Wire.now())) {
      expire();
    }
    return gone;
  }

  /**
   * Changes the value this leader publishes (a new address, what it serves) without giving up the
   * leadership: a Proclaim by its name, token and term, on a majority of masters. From then on
   * {@link LockClient#leader} and observers report {@code value} under the same term, with a higher
   * {@link Leader#valueVersion()}; returns that version. Bounded by the client's deadline.
   *
   * <p>It is an act of the leader, so a leadership already known to be over (as {@link #check()}
   * would tell, the clock included) is refused at once, without a call. When the daemon answers
   * that the term no longer leads, the leadership ends here too ({@link #lost()} completes) rather
   * than at the session's next extension: the caller must stop acting as leader now.
   *
   * @param value the new value (at most the daemon's {@code limits.max_owner_len} bytes)
   * @return the new value's version (the contract's uint64: compare with {@link
   *     Long#compareUnsigned})
   * @throws LockNotHeldException when this term no longer leads (lost, resigned, expired): the
   *     value was not changed. The same type as any call by a token that no longer holds (kind
   *     {@code not_held}); when refused without a call, its cause is the {@link LockLostException}
   *     that {@link #check()} throws
   * @throws UnavailableException when too few masters answered: some reads may show the new value
   *     and others the old until a Proclaim succeeds; proclaiming again is safe
   */
  public long proclaim(String value) {
    Wire.requireNonNull(value, "value");
    LockLostException over = goneNow();
    if (over != null) {
      throw notLeading(over);
    }
    State now = state;
    ProclaimRequest request =
        ProclaimRequest.newBuilder()
            .setName(now.name())
            .setToken(now.token())
            .setTerm(now.term())
            .setValue(value)
            .build();
    long version;
    try {
      version = proclaimCall.apply(request).getValueVersion();
    } catch (LockNotHeldException refused) {
      markGone("Proclaim: the term no longer leads", Status.Code.FAILED_PRECONDITION, refused);
      cancel("the term no longer leads");
      throw refused;
    }
    synchronized (guard) {
      Published last = published;
      if (last == null || Long.compareUnsigned(version, last.version()) > 0) {
        published = new Published(value, version);
      }
    }
    return version;
  }

  /** The FAILED_PRECONDITION a Proclaim refused without a call throws, as the daemon's would be. */
  private static LockNotHeldException notLeading(LockLostException over) {
    return new LockNotHeldException(
        "Proclaim: " + Status.Code.FAILED_PRECONDITION + ": " + over.details(),
        Status.Code.FAILED_PRECONDITION,
        over.details(),
        over);
  }

  /**
   * Resigns: sends {@code resign} and waits for the daemon's {@code resigned}. Returns {@code
   * was_leader}: false when the leadership had already ended (expired, or resigned from outside).
   * Calling it again returns the same answer. Past the client's deadline the session is cancelled,
   * which makes the daemon end the leadership too, and it throws {@link
   * DeadlineExceededException}.
   */
  public boolean resign() {
    CompletableFuture<Boolean> answer;
    synchronized (guard) {
      answer = resigned != null ? resigned : startResign();
    }
    return awaitResign(answer);
  }

  /**
   * Resigns (see {@link #resign()}) unless a resignation was already attempted; the answer is
   * dropped. Idempotent, and never rethrows a failure {@link #resign()} already threw (as {@link
   * Lease#close()}).
   */
  @Override
  public void close() {
    CompletableFuture<Boolean> answer;
    synchronized (guard) {
      if (resigned != null) {
        return;
      }
      answer = startResign();
    }
    awaitResign(answer);
  }

  /** Records the attempt and sends {@code resign} if still leading (holds guard). */
  private CompletableFuture<Boolean> startResign() {
    if (gone != null) {
      resigned = CompletableFuture.completedFuture(false);
    } else {
      resigning = new CompletableFuture<>();
      resigned = resigning;
      send(CampaignRequest.newBuilder().setResign(CampaignRequest.Resign.getDefaultInstance()).build());
    }
    return resigned;
  }

  private boolean awaitResign(CompletableFuture<Boolean> answer) {
    try {
      return answer.get(resignTimeout.toNanos(), TimeUnit.NANOSECONDS);
    } catch (TimeoutException late) {
      markGone("resigned at the client's request (no answer)", Status.Code.FAILED_PRECONDITION, null);
      cancel("no resigned in time");
      String details =
          "no `resigned` within " + resignTimeout.toMillis() + " ms; the session was cancelled";
      DeadlineExceededException error =
          new DeadlineExceededException(
              "resign: " + details, Status.Code.DEADLINE_EXCEEDED, details, late);
      answer.completeExceptionally(error);
      throw error;
    } catch (ExecutionException failed) {
      throw Errors.fromThrowable(failed.getCause(), "resign");
    } catch (InterruptedException interrupted) {
      Thread.currentThread().interrupt();
      cancel("interrupted while resigning");
      throw new RedlockdException(
          "resign: interrupted; the session was cancelled",
          Status.Code.CANCELLED,
          "interrupted",
          interrupted);
    }
  }

  @Override
  public String toString() {
    State now = state;
    String told =
        now == null
            ? "not elected"
            : "name=\""
                + now.name()
                + "\", value=\""
                + value()
                + "\", term="
                + Long.toUnsignedString(now.term())
                + ", validity="
                + now.validity();
    LockLostException reason = gone;
    return "Leadership{" + told + (reason != null ? ", lost: " + reason.reason() : "") + "}";
  }

  // ---- the session's plumbing, used by LockClient ----

  ClientResponseObserver<CampaignRequest, CampaignResponse> observer() {
    return new Events();
  }

  /** Sends the first message, {@code campaign}. */
  void start(CampaignRequest.Start campaign) {
    synchronized (guard) {
      send(CampaignRequest.newBuilder().setCampaign(campaign).build());
    }
  }

  /**
   * Waits for the election, up to {@code limit} (null: however long it takes); on failure,
   * timeout or interrupt the session is cancelled, which withdraws the candidacy.
   */
  Leadership awaitElected(Duration limit) {
    try {
      if (limit == null) {
        elected.get();
      } else {
        elected.get(limit.toNanos(), TimeUnit.NANOSECONDS);
      }
      return this;
    } catch (TimeoutException late) {
      abandon("not elected in time");
      String details = "not elected within " + limit.toMillis() + " ms";
      throw new DeadlineExceededException(
          "Campaign: " + details, Status.Code.DEADLINE_EXCEEDED, details, late);
    } catch (ExecutionException failed) {
      abandon("failed");
      throw Errors.fromThrowable(failed.getCause(), "Campaign");
    } catch (InterruptedException interrupted) {
      abandon("interrupted");
      Thread.currentThread().interrupt();
      throw new RedlockdException(
          "Campaign: interrupted; the candidacy was withdrawn",
          Status.Code.CANCELLED,
          "interrupted",
          interrupted);
    }
  }

  /** Cancels the session (the daemon then ends the leadership); it counts as lost. */
  void cancel(String why) {
    synchronized (guard) {
      if (cancelled || requests == null) {
        return;
      }
      cancelled = true;
      requests.cancel(why, null);
    }
  }

  private void abandon(String why) {
    synchronized (guard) {
      abandoned = true;
    }
    cancel(why);
  }

  /** Writes one message unless the stream is already closed (caller holds `guard`). */
  private void send(CampaignRequest request) {
    if (cancelled || halfClosed) {
      return;
    }
    requests.onNext(request);
  }

  /** Records the first reason the leadership is gone and completes {@link #lost()} with it. */
  private void markGone(String reason, Status.Code code, Throwable cause) {
    LockLostException reasonError;
    synchronized (guard) {
      if (watchdog != null) {
        watchdog.cancel(false);
      }
      if (gone != null) {
        return;
      }
      String name = state == null ? "?" : state.name();
      String details = "the leadership of " + name + " is no longer held: " + reason;
      reasonError = new LockLostException(details, code, details, reason, cause);
      gone = reasonError;
    }
    lost.complete(reasonError);
  }

  /** Takes in an {@code elected} or {@code kept} (holds guard). */
  private void record(redlock.v1.Election.Leadership wire, long arrived) {
    Duration validity = Wire.fromProto(wire.getValidity());
    state =
        new State(
            wire.getName(),
            wire.getValue(),
            wire.getTerm(),
            wire.getToken(),
            validity,
            Wire.plus(arrived, validity));
    arm();
  }

  /** Whether the last known validity, less the stop margin, is over at {@code now}. */
  private boolean lapsed(long now) {
    State known = state;
    return known != null && now - (known.validUntilNanos() - Lease.stopMargin(ttl).toNanos()) >= 0;
  }

  /** Ends the leadership whose validity ran out (the watchdog, {@link #check()}, a late kept). */
  private void expire() {
    markGone(EXPIRED, Status.Code.FAILED_PRECONDITION, null);
    cancel("no extension in time");
  }

  /** (Re)starts the timer that counts the leadership as lost when its validity runs out. */
  private void arm() {
    if (watchdog != null) {
      watchdog.cancel(false);
    }
    long delay = state.validUntilNanos() - Lease.stopMargin(ttl).toNanos() - Wire.now();
    try {
      watchdog = scheduler.schedule(this::expire, Math.max(0L, delay), TimeUnit.NANOSECONDS);
    } catch (RejectedExecutionException closed) {
      watchdog = null; // the client is closing; this session is cancelled with it
    }
  }

  /** The call's events, in order, on gRPC's threads. */
  private final class Events implements ClientResponseObserver<CampaignRequest, CampaignResponse> {
    @Override
    public void beforeStart(ClientCallStreamObserver<CampaignRequest> stream) {
      synchronized (guard) {
        requests = stream;
      }
    }

    @Override
    public void onNext(CampaignResponse event) {
      long arrived = Wire.now();
      if (!elected.isDone()) {
        if (event.getEventCase() == CampaignResponse.EventCase.ELECTED) {
          synchronized (guard) {
            if (abandoned) {
              return;
            }
            record(event.getElected(), arrived);
          }
          elected.complete(null);
        } else if (event.getEventCase() == CampaignResponse.EventCase.DRAINING) {
          // A stopping daemon elects nobody new; the stream ends (onCompleted) or errs next.
          draining = true;
        } else {
          String details = "`" + event.getEventCase() + "` before `elected`";
          cancel("protocol");
          elected.completeExceptionally(
              new LockLostException(
                  "Campaign: " + details, Status.Code.INTERNAL, details, details, null));
        }
        return;
      }
      switch (event.getEventCase()) {
        case KEPT:
          boolean late;
          synchronized (guard) {
            if (gone != null) {
              return;
            }
            // A kept read after the validity ran out (it waited in the socket while the process
            // was paused) must not revive the leadership, which a successor may hold by now: a
            // lapse is final.
            late = lapsed(arrived);
            if (!late) {
              record(event.getKept(), arrived);
              extensions += 1;
            }
          }
          if (late) {
            expire();
          }
          break;
        case DRAINING:
          draining = true;
          break;
        case LOST:
          markGone("lost: " + event.getLost().getReason(), Status.Code.FAILED_PRECONDITION, null);
          break;
        case RESIGNED:
          CompletableFuture<Boolean> waiting;
          synchronized (guard) {
            waiting = resigning;
            resigning = null;
          }
          if (waiting != null) {
            markGone("resigned at the client's request", Status.Code.FAILED_PRECONDITION, null);
            synchronized (guard) {
              if (!cancelled && !halfClosed) {
                halfClosed = true;
                requests.onCompleted();
              }
            }
            waiting.complete(event.getResigned().getWasLeader());
          } else {
            markGone("resigned by the daemon, unrequested", Status.Code.FAILED_PRECONDITION, null);
          }
          break;
        default:
          markGone(
              "unexpected event " + event.getEventCase() + " mid-session",
              Status.Code.INTERNAL,
              null);
          cancel("protocol");
      }
    }

    @Override
    public void onError(Throwable error) {
      Status status = Status.fromThrowable(error);
      CompletableFuture<Boolean> waiting;
      synchronized (guard) {
        cancelled = true;
        waiting = resigning;
        resigning = null;
      }
      if (!elected.isDone()) {
        elected.completeExceptionally(Errors.fromThrowable(error, "Campaign"));
      } else {
        if (waiting != null) {
          waiting.completeExceptionally(Errors.fromThrowable(error, "resign"));
        }
        String description = status.getDescription() == null ? "" : status.getDescription();
        markGone(
            "the session broke: " + status.getCode() + ": " + description, status.getCode(), error);
      }
      onFinish.run();
    }

    @Override
    public void onCompleted() {
      CompletableFuture<Boolean> waiting;
      synchronized (guard) {
        halfClosed = true;
        waiting = resigning;
        resigning = null;
      }
      if (!elected.isDone()) {
        String details = "the session ended before this candidate was elected";
        elected.completeExceptionally(
            new UnavailableException(
                "Campaign: " + details, Status.Code.UNAVAILABLE, details, null));
      } else {
        if (waiting != null) {
          String details = "the session ended unanswered";
          waiting.completeExceptionally(
              new LockLostException(
                  "resign: " + details, Status.Code.UNAVAILABLE, details, details, null));
        }
        markGone("the session ended", Status.Code.FAILED_PRECONDITION, null);
      }
      onFinish.run();
    }
  }
}
