package dev.redlockd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import redlock.v1.Election.CampaignResponse;
import redlock.v1.Election.ProclaimRequest;
import redlock.v1.Election.ProclaimResponse;
import redlock.v1.LockOuterClass.HoldEvent;

/**
 * A validity that ran out, without a daemon: a session's events are handed to its observer here,
 * and its watchdog's scheduler is kept busy so that the timer cannot run, as in a process resumed
 * after a pause (SIGSTOP) whose overdue timer has not run yet. With a ttl of 1 s the stop margin is
 * 100 ms, so a validity of 100 ms has already run out when it arrives. {@code check()} and {@code
 * isLost()} must see it themselves, and a later extension must not revive it. Nothing sleeps.
 */
class LapseTest {
  private static final Duration TTL = Duration.ofSeconds(1);
  private static final Duration OVER = Lease.stopMargin(TTL);
  private static final String EXPIRED = "no extension arrived before the validity ran out";
  /** There is no daemon: a Proclaim that reaches the wire fails the test. */
  private static final Function<ProclaimRequest, ProclaimResponse> NO_CALL =
      request -> {
        throw new AssertionError("Proclaim was sent: " + request.getValue());
      };

  private final CountDownLatch busy = new CountDownLatch(1);
  private final CountDownLatch free = new CountDownLatch(1);
  private ScheduledExecutorService stalled;

  @BeforeEach
  void stallTheWatchdog() throws InterruptedException {
    stalled = Executors.newSingleThreadScheduledExecutor();
    stalled.execute(
        () -> {
          busy.countDown();
          try {
            free.await();
          } catch (InterruptedException stopped) {
            Thread.currentThread().interrupt();
          }
        });
    assertTrue(busy.await(10, TimeUnit.SECONDS));
  }

  @AfterEach
  void freeIt() {
    free.countDown();
    stalled.shutdownNow();
  }

  /** Lets the stalled scheduler run whatever is due (an overdue watchdog), then stops it. */
  private void runTheWatchdog() throws InterruptedException {
    free.countDown();
    stalled.shutdown();
    assertTrue(stalled.awaitTermination(10, TimeUnit.SECONDS));
  }

  private static CampaignResponse elected(Duration validity) {
    return CampaignResponse.newBuilder().setElected(leadership(validity)).build();
  }

  private static CampaignResponse kept(Duration validity) {
    return CampaignResponse.newBuilder().setKept(leadership(validity)).build();
  }

  private static redlock.v1.Election.Leadership leadership(Duration validity) {
    return redlock.v1.Election.Leadership.newBuilder()
        .setName("scheduler")
        .setValue("pod-a")
        .setTerm(7)
        .setToken("secret")
        .setValidity(Wire.toProto(validity, "validity"))
        .build();
  }

  private static HoldEvent acquired(Duration validity) {
    return HoldEvent.newBuilder().setAcquired(lock(validity)).build();
  }

  private static HoldEvent extended(Duration validity) {
    return HoldEvent.newBuilder().setExtended(lock(validity)).build();
  }

  private static redlock.v1.LockOuterClass.Lock lock(Duration validity) {
    return redlock.v1.LockOuterClass.Lock.newBuilder()
        .setResource("jobs/nightly")
        .setToken("secret")
        .setFence(7)
        .setValidity(Wire.toProto(validity, "validity"))
        .build();
  }

  private Leadership elect(Duration validity) {
    Leadership leadership = new Leadership(TTL, TTL, stalled, () -> {}, NO_CALL);
    leadership.observer().onNext(elected(validity));
    return leadership.awaitElected(Duration.ZERO);
  }

  private Lease grant(Duration validity) {
    Lease lease = new Lease(TTL, TTL, stalled, () -> {});
    lease.observer().onNext(acquired(validity));
    return lease.awaitGrant(Duration.ZERO);
  }

  @Test
  void aLeaderWithinItsValidityPassesCheck() {
    Leadership leadership = elect(Duration.ofSeconds(30));
    leadership.check();
    assertFalse(leadership.isLost());
    Lease lease = grant(Duration.ofSeconds(30));
    lease.check();
    assertFalse(lease.isLost());
  }

  @Test
  void checkEndsALeadershipPastItsValidityBeforeTheWatchdogRuns() throws InterruptedException {
    Leadership leadership = elect(OVER);
    AtomicInteger told = new AtomicInteger();
    leadership.lost().thenAccept(reason -> told.incrementAndGet());
    assertFalse(leadership.lost().isDone()); // the watchdog has not run

    LockLostException error = assertThrows(LockLostException.class, leadership::check);
    assertEquals(EXPIRED, error.reason());
    assertTrue(leadership.isLost());
    assertSame(error, leadership.lost().getNow(null));
    assertEquals(1, told.get());

    runTheWatchdog(); // late, it changes nothing: the first reason stays
    assertSame(error, assertThrows(LockLostException.class, leadership::check));
    assertEquals(1, told.get());
  }

  /**
   * Proclaim is an act of the leader: past the validity it is refused at once, as the daemon would
   * refuse a term that no longer leads, and nothing is sent.
   */
  @Test
  void proclaimPastTheValidityIsRefusedWithoutACall() {
    Leadership leadership = elect(OVER);
    LockNotHeldException refused =
        assertThrows(LockNotHeldException.class, () -> leadership.proclaim("moved"));
    assertEquals("not_held", refused.kind());
    assertEquals(EXPIRED, assertInstanceOf(LockLostException.class, refused.getCause()).reason());
    assertTrue(leadership.isLost());
    assertEquals(0L, leadership.valueVersion());
  }

  @Test
  void isLostEndsALeadershipPastItsValidityBeforeTheWatchdogRuns() {
    Leadership leadership = elect(OVER);
    assertTrue(leadership.isLost());
    assertEquals(EXPIRED, leadership.lost().getNow(null).reason());
  }

  @Test
  void aKeptReadAfterTheLapseDoesNotReviveTheLeadership() throws InterruptedException {
    Leadership leadership = new Leadership(TTL, TTL, stalled, () -> {}, NO_CALL);
    var events = leadership.observer();
    events.onNext(elected(OVER));
    leadership.awaitElected(Duration.ZERO);

    events.onNext(kept(Duration.ofSeconds(30))); // queued while paused, read on resuming
    assertTrue(leadership.lost().isDone()); // ended by reading the kept, not by check()
    assertEquals(EXPIRED, assertThrows(LockLostException.class, leadership::check).reason());
    assertEquals(0, leadership.extensions());
    assertEquals(OVER, leadership.validity());

    runTheWatchdog();
    events.onNext(kept(Duration.ofSeconds(30)));
    assertTrue(leadership.isLost());
    assertEquals(0, leadership.extensions());
  }

  @Test
  void checkEndsALeasePastItsValidityBeforeTheWatchdogRuns() throws InterruptedException {
    Lease lease = grant(OVER);
    AtomicInteger told = new AtomicInteger();
    lease.lost().thenAccept(reason -> told.incrementAndGet());
    assertFalse(lease.lost().isDone()); // the watchdog has not run

    LockLostException error = assertThrows(LockLostException.class, lease::check);
    assertEquals(EXPIRED, error.reason());
    assertTrue(lease.isLost());
    assertSame(error, lease.lost().getNow(null));
    assertEquals(1, told.get());

    runTheWatchdog();
    assertSame(error, assertThrows(LockLostException.class, lease::check));
    assertEquals(1, told.get());
  }

  @Test
  void isLostEndsALeasePastItsValidityBeforeTheWatchdogRuns() {
    Lease lease = grant(OVER);
    assertTrue(lease.isLost());
    assertEquals(EXPIRED, lease.lost().getNow(null).reason());
  }

  @Test
  void anExtensionReadAfterTheLapseDoesNotReviveTheLease() throws InterruptedException {
    Lease lease = new Lease(TTL, TTL, stalled, () -> {});
    var events = lease.observer();
    events.onNext(acquired(OVER));
    lease.awaitGrant(Duration.ZERO);

    events.onNext(extended(Duration.ofSeconds(30))); // queued while paused, read on resuming
    assertTrue(lease.lost().isDone()); // ended by reading the extension, not by check()
    assertEquals(EXPIRED, assertThrows(LockLostException.class, lease::check).reason());
    assertEquals(0, lease.extensions());
    assertEquals(OVER, lease.lock().validity());

    runTheWatchdog();
    events.onNext(extended(Duration.ofSeconds(30)));
    assertTrue(lease.isLost());
    assertEquals(0, lease.extensions());
  }
}
