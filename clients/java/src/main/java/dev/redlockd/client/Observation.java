package dev.redlockd.client;

import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import redlock.v1.Election.ObserveRequest;
import redlock.v1.Election.ObserveResponse;

/**
 * A subscription to an election's leader changes, from {@link LockClient#observe}: an Observe
 * stream whose events go to a {@link Listener}, the current state first, then each change (a
 * leader of a higher term, a new value of the same term from {@link Leadership#proclaim}, or no
 * leader after one), never going back to a term or value already told. Close it to stop; {@link
 * #ended()} says when and why the stream ended.
 */
public final class Observation implements AutoCloseable {
  /** Receives an election's leader changes, in (term, value version) order, one at a time. */
  @FunctionalInterface
  public interface Listener {
    /**
     * The election's state: its leader, or empty when it has none. Called on a gRPC thread, one
     * call at a time; return quickly (hand long work to an executor). An exception thrown here ends
     * the observation ({@link #ended()} completes with it).
     *
     * @param leader the leader now, or empty
     */
    void onChange(Optional<Leader> leader);
  }

  private final String name;
  private final Listener listener;
  private final Runnable onFinish;
  private final CompletableFuture<Void> ended = new CompletableFuture<>();
  private final Object guard = new Object();

  // Guarded by `guard`.
  private ClientCallStreamObserver<ObserveRequest> requests;
  private boolean closed;
  // Touched on gRPC's thread only (events are serialized).
  private boolean told;
  private boolean toldLeader;
  private long lastTerm;
  private long lastValueVersion;

  Observation(String name, Listener listener, Runnable onFinish) {
    this.name = name;
    this.listener = listener;
    this.onFinish = onFinish;
  }

  /** The election observed. */
  public String name() {
    return name;
  }

  /**
   * Completes when the stream ends: normally after {@link #close()}, exceptionally with a
   * {@link RedlockdException} when it broke (the daemon stopping, or too few masters answered:
   * {@link UnavailableException}, observe again, on another replica; the daemon gone) or with what
   * the listener threw. Each call returns a new view.
   */
  public CompletableFuture<Void> ended() {
    return ended.copy();
  }

  /** Whether the stream has ended (see {@link #ended()}). */
  public boolean isEnded() {
    return ended.isDone();
  }

  /** Stops observing: cancels the stream. Idempotent. */
  @Override
  public void close() {
    cancel("observation closed");
  }

  @Override
  public String toString() {
    return "Observation{name=\"" + name + "\"" + (ended.isDone() ? ", ended" : "") + "}";
  }

  // ---- plumbing, used by LockClient ----

  ClientResponseObserver<ObserveRequest, ObserveResponse> observer() {
    return new Events();
  }

  void cancel(String why) {
    synchronized (guard) {
      if (closed) {
        return;
      }
      closed = true;
      if (requests != null) {
        requests.cancel(why, null);
      }
    }
    ended.complete(null);
  }

  /**
   * Whether an event moves the state forward, as the daemon only ever sends: the first state, a
   * leader after the last one told (a higher term, or the same term with a higher value version:
   * a Proclaim), or no leader after a leader. A value is ordered by its version, not by being
   * different: a reading of an older value, from masters a failed Proclaim did not reach, must not
   * undo a newer one already told. A later stream (the caller's next observation) starts afresh.
   */
  private boolean forward(ObserveResponse event) {
    if (!told) {
      return true;
    }
    if (event.getHasLeader()) {
      int term = Long.compareUnsigned(event.getLeader().getTerm(), lastTerm);
      return term > 0
          || (term == 0
              && Long.compareUnsigned(event.getLeader().getValueVersion(), lastValueVersion) > 0);
    }
    return toldLeader;
  }

  private final class Events implements ClientResponseObserver<ObserveRequest, ObserveResponse> {
    @Override
    public void beforeStart(ClientCallStreamObserver<ObserveRequest> stream) {
      synchronized (guard) {
        requests = stream;
      }
    }

    @Override
    public void onNext(ObserveResponse event) {
      if (ended.isDone() || !forward(event)) {
        return;
      }
      told = true;
      toldLeader = event.getHasLeader();
      if (toldLeader) {
        lastTerm = event.getLeader().getTerm();
        lastValueVersion = event.getLeader().getValueVersion();
      }
      Optional<Leader> leader =
          event.getHasLeader() ? Optional.of(Leader.fromWire(event.getLeader())) : Optional.empty();
      try {
        listener.onChange(leader);
      } catch (RuntimeException | Error thrown) {
        synchronized (guard) {
          closed = true;
          requests.cancel("the listener threw", thrown);
        }
        ended.completeExceptionally(thrown);
      }
    }

    @Override
    public void onError(Throwable error) {
      boolean asked;
      synchronized (guard) {
        asked = closed;
        closed = true;
      }
      if (asked) {
        ended.complete(null);
      } else {
        ended.completeExceptionally(Errors.fromThrowable(error, "Observe"));
      }
      onFinish.run();
    }

    @Override
    public void onCompleted() {
      synchronized (guard) {
        closed = true;
      }
      ended.complete(null);
      onFinish.run();
    }
  }
}
