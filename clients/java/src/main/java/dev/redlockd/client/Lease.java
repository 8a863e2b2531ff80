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
import redlock.v1.LockOuterClass.AcquireRequest;
import redlock.v1.LockOuterClass.HoldEvent;
import redlock.v1.LockOuterClass.HoldRequest;

/**
 * A lock held through a Hold session, from {@link LockClient#hold}. The daemon extends the lock
 * while the session is open; this side turns every way the lock can go away into one signal,
 * {@link #lost()}, so that the work done under the lock can stop at once:
 *
 * <ul>
 *   <li>the daemon sends {@code lost} (an extension failed);
 *   <li>the daemon sends a {@code released} nobody asked for (it is stopping);
 *   <li>the stream ends or breaks (daemon gone, connection cut, client closed);
 *   <li>no extension arrived before the last known validity ran out, less a margin (the daemon or
 *       the network went quiet);
 *   <li>{@link #release()} or {@link #close()} gave the lock up on purpose.
 * </ul>
 *
 * <p>Use it in try-with-resources: {@link #close()} releases the lock.
 */
public final class Lease implements AutoCloseable {
  /** Why the lock is gone when its validity, less the stop margin, ran out unextended. */
  private static final String EXPIRED = "no extension arrived before the validity ran out";

  private final Duration ttl;
  private final Duration releaseTimeout;
  private final ScheduledExecutorService scheduler;
  private final Runnable onFinish;
  private final CompletableFuture<Lock> granted = new CompletableFuture<>();
  private final CompletableFuture<LockLostException> lost = new CompletableFuture<>();
  private final Object guard = new Object();

  // All below guarded by `guard`.
  private ClientCallStreamObserver<HoldRequest> requests;
  private boolean cancelled;
  private boolean halfClosed;
  private boolean abandoned;
  private ScheduledFuture<?> watchdog;
  private CompletableFuture<Boolean> releasing;
  private CompletableFuture<Boolean> released;
  private long extensions;
  private volatile boolean draining;
  private volatile Lock lock;
  private volatile LockLostException gone;

  Lease(Duration ttl, Duration releaseTimeout, ScheduledExecutorService scheduler, Runnable onFinish) {
    this.ttl = ttl;
    this.releaseTimeout = releaseTimeout;
    this.scheduler = scheduler;
    this.onFinish = onFinish;
  }

  /**
   * The loss margin: how long before the last known validity ends a lease counts its lock as lost
   * when no extension arrived ({@link #lost()} completes, {@link #check()} throws): a tenth of the
   * ttl, from 50 ms to 2 s (as redlockctl and the other clients do; Go's {@code StopMargin}). It
   * covers the time an event spends in transit. Stop writing under the lock by then.
   *
   * @param ttl the ttl the lease was opened with
   * @return the margin for that ttl
   */
  public static Duration stopMargin(Duration ttl) {
    long tenth = ttl.toMillis() / 10;
    return Duration.ofMillis(Math.min(2000L, Math.max(50L, tenth)));
  }

  /** The lock as last granted or extended (its validity counted from the event's arrival). */
  public Lock lock() {
    return lock;
  }

  /** The lock's fencing token: pass it with every write made under the lock. */
  public long fence() {
    return lock.fence();
  }

  /** The resource locked. */
  public String resource() {
    return lock.resource();
  }

  /**
   * Whether the daemon said it is stopping: the lock is still held and extended until the drain
   * ends, then lost ({@link #lost()} completes; no longer extended, it expires with its ttl).
   * Finish the work and close the lease.
   */
  public boolean draining() {
    return draining;
  }

  /** How many extensions the daemon has made so far. */
  public long extensions() {
    synchronized (guard) {
      return extensions;
    }
  }

  /**
   * Completes (with the reason) as soon as the lock is no longer held or no longer guaranteed;
   * never completes exceptionally. Each call returns a new view, so completing or cancelling it
   * does not change the lease.
   */
  public CompletableFuture<LockLostException> lost() {
    return lost.copy();
  }

  /**
   * Whether the lock is gone (the same moment {@link #lost()} completes). Like {@link #check()}, it
   * reads the clock itself and ends a lease whose validity ran out.
   */
  public boolean isLost() {
    return goneNow() != null;
  }

  /**
   * Throws the {@link LockLostException} once the lock is gone; call it between steps of work. It
   * compares the clock with the validity (less {@link #stopMargin(Duration)}) itself, and ends a
   * lease past it at once, as the watchdog timer would.
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
   * Why the lock is gone, or null; first ends the lease if its validity ran out. The watchdog timer
   * alone is not enough: a process paused past the validity (SIGSTOP, a suspended VM, a long GC)
   * resumes with the overdue timer still queued behind it, and must be told at once when it resumes,
   * before it writes under a lock another holder may have taken by now, not when the timer thread
   * gets to run.
   */
  private LockLostException goneNow() {
    if (gone == null && lapsed(Wire.now())) {
      expire();
    }
    return gone;
  }

  /**
   * Releases the lock: sends {@code release} and waits for the daemon's {@code released}.
   * Returns {@code was_held}: false when the lock had expired or was already gone (the work may
   * have overlapped another holder's). Calling it again returns the same answer. Past the client's
   * deadline the session is cancelled, which makes the daemon release too, and it throws {@link
   * DeadlineExceededException}.
   */
  public boolean release() {
    CompletableFuture<Boolean> answer;
    synchronized (guard) {
      answer = released != null ? released : startRelease();
    }
    return awaitRelease(answer);
  }

  /**
   * Releases the lock (see {@link #release()}) unless a release was already attempted, by {@link
   * #release()} or an earlier close; the answer is dropped. It is idempotent and never rethrows a
   * failure that {@link #release()} already threw: in try-with-resources around a body whose
   * {@code release()} failed, Java would otherwise add that exception to itself as suppressed
   * ("Self-suppression not permitted") and hide it. A first release that fails here throws.
   */
  @Override
  public void close() {
    CompletableFuture<Boolean> answer;
    synchronized (guard) {
      if (released != null) {
        return;
      }
      answer = startRelease();
    }
    awaitRelease(answer);
  }

  /** Records the release attempt and sends {@code release} if the lock is held (holds guard). */
  private CompletableFuture<Boolean> startRelease() {
    if (gone != null) {
      released = CompletableFuture.completedFuture(false);
    } else {
      releasing = new CompletableFuture<>();
      released = releasing;
      send(HoldRequest.newBuilder().setRelease(HoldRequest.Release.getDefaultInstance()).build());
    }
    return released;
  }

  /** Waits for the answer to the release attempt {@code answer}, up to the release timeout. */
  private boolean awaitRelease(CompletableFuture<Boolean> answer) {
    try {
      return answer.get(releaseTimeout.toNanos(), TimeUnit.NANOSECONDS);
    } catch (TimeoutException late) {
      markGone("released at the client's request (no answer)", Status.Code.FAILED_PRECONDITION, null);
      cancel("no released in time");
      String details =
          "no `released` within " + releaseTimeout.toMillis() + " ms; the session was cancelled";
      DeadlineExceededException error =
          new DeadlineExceededException(
              "release: " + details, Status.Code.DEADLINE_EXCEEDED, details, late);
      answer.completeExceptionally(error);
      throw error;
    } catch (ExecutionException failed) {
      throw Errors.fromThrowable(failed.getCause(), "release");
    } catch (InterruptedException interrupted) {
      Thread.currentThread().interrupt();
      cancel("interrupted while releasing");
      throw new RedlockdException(
          "release: interrupted; the session was cancelled",
          Status.Code.CANCELLED,
          "interrupted",
          interrupted);
    }
  }

  @Override
  public String toString() {
    return "Lease{" + lock + (gone != null ? ", lost: " + gone.reason() : "") + "}";
  }

  // ---- the session's plumbing, used by LockClient ----

  /** The observer of the call's events; gRPC hands it the request stream before the start. */
  ClientResponseObserver<HoldRequest, HoldEvent> observer() {
    return new Events();
  }

  /** Sends the first message, {@code acquire}. */
  void start(AcquireRequest acquire) {
    synchronized (guard) {
      send(HoldRequest.newBuilder().setAcquire(acquire).build());
    }
  }

  /** Waits up to {@code limit} for the grant; on failure the session is cancelled. */
  Lease awaitGrant(Duration limit) {
    try {
      granted.get(limit.toNanos(), TimeUnit.NANOSECONDS);
      return this;
    } catch (TimeoutException late) {
      abandon("no lock in time");
      String details = "no lock within " + limit.toMillis() + " ms";
      throw new DeadlineExceededException(
          "Hold: " + details, Status.Code.DEADLINE_EXCEEDED, details, late);
    } catch (ExecutionException failed) {
      abandon("failed");
      throw Errors.fromThrowable(failed.getCause(), "Hold");
    } catch (InterruptedException interrupted) {
      abandon("interrupted");
      Thread.currentThread().interrupt();
      throw new RedlockdException(
          "Hold: interrupted; the session was cancelled",
          Status.Code.CANCELLED,
          "interrupted",
          interrupted);
    }
  }

  /** Cancels the session (the daemon then releases the lock); the lease counts it as lost. */
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
  private void send(HoldRequest request) {
    if (cancelled || halfClosed) {
      return;
    }
    requests.onNext(request);
  }

  /** Records the first reason the lock is gone and completes {@link #lost()} with it. */
  private void markGone(String reason, Status.Code code, Throwable cause) {
    LockLostException reasonError;
    synchronized (guard) {
      if (watchdog != null) {
        watchdog.cancel(false);
      }
      if (gone != null) {
        return;
      }
      String resource = lock == null ? "?" : lock.resource();
      String details = "the lock on " + resource + " is no longer held: " + reason;
      reasonError = new LockLostException(details, code, details, reason, cause);
      gone = reasonError;
    }
    lost.complete(reasonError);
  }

  /** Whether the last known validity, less the stop margin, is over at {@code now}. */
  private boolean lapsed(long now) {
    Lock known = lock;
    return known != null && now - (known.validUntilNanos() - stopMargin(ttl).toNanos()) >= 0;
  }

  /** Ends the lease whose validity ran out (the watchdog, {@link #check()}, a late extension). */
  private void expire() {
    markGone(EXPIRED, Status.Code.FAILED_PRECONDITION, null);
    // Cancelling makes a daemon that still hears us release the lock.
    cancel("no extension in time");
  }

  /** (Re)starts the timer that counts the lock as lost when its validity runs out unrenewed. */
  private void arm() {
    if (watchdog != null) {
      watchdog.cancel(false);
    }
    long delay = lock.validUntilNanos() - stopMargin(ttl).toNanos() - Wire.now();
    try {
      watchdog = scheduler.schedule(this::expire, Math.max(0L, delay), TimeUnit.NANOSECONDS);
    } catch (RejectedExecutionException closed) {
      // The client was closed: its sessions are being cancelled, and this one ends with them.
      watchdog = null;
    }
  }

  /** The call's events, in order, on gRPC's threads. */
  private final class Events implements ClientResponseObserver<HoldRequest, HoldEvent> {
    @Override
    public void beforeStart(ClientCallStreamObserver<HoldRequest> stream) {
      synchronized (guard) {
        requests = stream;
      }
    }

    @Override
    public void onNext(HoldEvent event) {
      long arrived = Wire.now();
      if (!granted.isDone()) {
        if (event.getEventCase() == HoldEvent.EventCase.ACQUIRED) {
          synchronized (guard) {
            if (abandoned) {
              return;
            }
            lock = Lock.fromWire(event.getAcquired(), arrived);
            arm();
          }
          granted.complete(lock);
        } else {
          String details = "`" + event.getEventCase() + "` before `acquired`";
          cancel("protocol");
          granted.completeExceptionally(
              new LockLostException("Hold: " + details, Status.Code.INTERNAL, details, details, null));
        }
        return;
      }
      switch (event.getEventCase()) {
        case EXTENDED:
          boolean late;
          synchronized (guard) {
            if (gone != null) {
              return;
            }
            // An extension read after the validity ran out (it waited in the socket while the
            // process was paused) must not revive a lock another holder may have by now: a lapse
            // is final.
            late = lapsed(arrived);
            if (!late) {
              lock = Lock.fromWire(event.getExtended(), arrived);
              extensions += 1;
              arm();
            }
          }
          if (late) {
            expire();
          }
          break;
        case DRAINING:
          // Not an end: the daemon keeps the lock until the drain ends.
          draining = true;
          break;
        case LOST:
          markGone("lost: " + event.getLost().getReason(), Status.Code.FAILED_PRECONDITION, null);
          break;
        case RELEASED:
          CompletableFuture<Boolean> waiting;
          synchronized (guard) {
            waiting = releasing;
            releasing = null;
          }
          if (waiting != null) {
            markGone("released at the client's request", Status.Code.FAILED_PRECONDITION, null);
            synchronized (guard) {
              if (!cancelled && !halfClosed) {
                halfClosed = true;
                requests.onCompleted();
              }
            }
            waiting.complete(event.getReleased().getWasHeld());
          } else {
            markGone("released by the daemon, unrequested", Status.Code.FAILED_PRECONDITION, null);
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
        waiting = releasing;
        releasing = null;
      }
      if (!granted.isDone()) {
        granted.completeExceptionally(Errors.fromThrowable(error, "Hold"));
      } else {
        if (waiting != null) {
          waiting.completeExceptionally(Errors.fromThrowable(error, "release"));
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
        waiting = releasing;
        releasing = null;
      }
      if (!granted.isDone()) {
        String details = "the session ended before the lock was acquired";
        granted.completeExceptionally(
            new LockLostException(
                "Hold: " + details, Status.Code.UNAVAILABLE, details, details, null));
      } else {
        if (waiting != null) {
          String details = "the session ended unanswered";
          waiting.completeExceptionally(
              new LockLostException(
                  "release: " + details, Status.Code.UNAVAILABLE, details, details, null));
        }
        markGone("the session ended", Status.Code.FAILED_PRECONDITION, null);
      }
      onFinish.run();
    }
  }
}
