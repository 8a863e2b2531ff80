package dev.redlockd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Leader election (ElectionService) against a real daemon over five real masters: a leader and a
 * standby, terms that only grow, Leader and Observe seeing each change in term order, a leader
 * proclaiming new values under its term, a bounded campaign, resigning from outside by token, a
 * closed client ending its leadership, bad input.
 * Every wait is bounded ({@link Poll#LIMIT}); nothing sleeps and hopes.
 */
class ElectionTest {
  private static final Duration TTL = Duration.ofSeconds(2);

  private static Daemon daemon;
  private static LockClient client;
  private static LockClient other;
  private static ExecutorService candidates;

  @BeforeAll
  static void start() throws Exception {
    daemon = Daemon.start();
    client = LockClient.builder(daemon.address).owner("java-election-test").build();
    other = LockClient.builder(daemon.address).owner("java-election-standby").build();
    candidates = Executors.newCachedThreadPool();
  }

  @AfterAll
  static void stop() {
    if (candidates != null) {
      candidates.shutdownNow();
    }
    for (LockClient each : new LockClient[] {client, other}) {
      if (each != null) {
        each.close();
      }
    }
    if (daemon != null) {
      daemon.close();
    }
  }

  /** A campaign through {@code via} on a thread of its own (it blocks until elected). */
  private static Future<Leadership> standBy(LockClient via, String name, String value) {
    return candidates.submit(() -> via.campaign(name, value, TTL));
  }

  private static <T> T within(Future<T> future) throws Exception {
    return future.get(Poll.LIMIT.toMillis(), TimeUnit.MILLISECONDS);
  }

  /** The next state an observation told, waiting at most {@link Poll#LIMIT}. */
  private static Optional<Leader> next(BlockingQueue<Optional<Leader>> told) throws Exception {
    Optional<Leader> state = told.poll(Poll.LIMIT.toMillis(), TimeUnit.MILLISECONDS);
    assertNotNull(state, "no change observed within " + Poll.LIMIT);
    return state;
  }

  @Test
  void aStandbyIsElectedWithAHigherTermOnlyAfterTheLeaderResigns() throws Exception {
    String name = "election/standby";
    Leadership first = client.campaign(name, "first", TTL);
    assertEquals(name, first.name());
    assertEquals("first", first.value());
    assertTrue(first.term() > 0, "term " + first.term());
    assertTrue(first.validity().compareTo(Duration.ZERO) > 0, first.validity().toString());
    assertTrue(first.validity().compareTo(TTL) <= 0, first.validity().toString());
    assertFalse(first.isLost());
    assertFalse(first.toString().contains(first.token()), "toString leaks the token");

    Leader seen = client.leader(name).orElseThrow();
    assertEquals("first", seen.value());
    assertEquals(first.term(), seen.term());
    assertEquals(name, seen.name());
    assertNotNull(seen.since());
    assertTrue(seen.remaining().compareTo(Duration.ZERO) > 0, seen.remaining().toString());

    Future<Leadership> standby = standBy(other, name, "second");
    // Three extensions (one every third of the ttl: past the first grant's whole ttl): the
    // leadership was kept alive, and the standby, waiting all along, was not elected.
    Poll.until(() -> first.extensions() >= 3, "the leadership was kept three times");
    assertFalse(standby.isDone(), "the standby was elected while the first leads");
    assertFalse(first.isLost());
    assertEquals(first.term(), client.leader(name).orElseThrow().term());

    assertTrue(first.resign(), "was leader");
    assertTrue(first.isLost(), "resigning ends the leadership");
    assertThrows(LockLostException.class, first::check);
    assertTrue(first.resign(), "resign() again gives the same answer");

    try (Leadership second = within(standby)) {
      assertEquals("second", second.value());
      assertTrue(
          Long.compareUnsigned(second.term(), first.term()) > 0,
          second.term() + " after " + first.term());
      Leader now = client.leader(name).orElseThrow();
      assertEquals("second", now.value());
      assertEquals(second.term(), now.term());
    }
    Poll.until(() -> client.leader(name).isEmpty(), "no leader after both resigned");
  }

  @Test
  void observeTellsEachChangeInTermOrder() throws Exception {
    String name = "election/observed";
    BlockingQueue<Optional<Leader>> told = new LinkedBlockingQueue<>();
    Observation observation = client.observe(name, told::add);
    try {
      assertEquals(Optional.empty(), next(told), "no leader yet, told first");

      Leadership first = client.campaign(name, "first", TTL);
      Leader firstSeen = next(told).orElseThrow();
      assertEquals(first.term(), firstSeen.term());
      assertEquals("first", firstSeen.value());

      Future<Leadership> standby = standBy(other, name, "second");
      first.close();
      Leadership second = within(standby);
      // Between the two: perhaps "no leader", never a term told before.
      List<Optional<Leader>> between = new ArrayList<>();
      Optional<Leader> state;
      do {
        state = next(told);
        between.add(state);
        state.ifPresent(
            leader ->
                assertTrue(
                    Long.compareUnsigned(leader.term(), first.term()) > 0,
                    "went back to term " + leader.term() + ": " + between));
      } while (state.isEmpty());
      assertEquals(second.term(), state.orElseThrow().term(), between.toString());
      assertEquals("second", state.orElseThrow().value());
      assertEquals(second.term(), client.leader(name).orElseThrow().term());

      second.close();
      assertEquals(Optional.empty(), next(told), "no leader after the second resigned");
      assertFalse(observation.isEnded());
    } finally {
      observation.close();
    }
    observation.ended().get(Poll.LIMIT.toMillis(), TimeUnit.MILLISECONDS);
    assertTrue(observation.isEnded());
  }

  /**
   * Proclaim changes the leader's value under the same term: Leader reads it, Observe tells each
   * value with a higher value version; once the term is resigned by token, Proclaim is refused
   * (LockNotHeldException), ends the leadership here at once, and changes nothing.
   */
  @Test
  void proclaimChangesTheValueUnderTheSameTermUntilTheTermNoLongerLeads() throws Exception {
    String name = "election/proclaimed";
    BlockingQueue<Optional<Leader>> told = new LinkedBlockingQueue<>();
    Observation observation = client.observe(name, told::add);
    try {
      assertEquals(Optional.empty(), next(told), "no leader yet, told first");
      Leadership leadership = client.campaign(name, "first", TTL);
      assertEquals(0L, leadership.valueVersion());
      Leader campaigned = next(told).orElseThrow();
      assertEquals("first", campaigned.value());
      assertEquals(0L, campaigned.valueVersion());

      long moved = leadership.proclaim("moved");
      assertTrue(Long.compareUnsigned(moved, 0L) > 0, "version " + moved);
      assertEquals("moved", leadership.value());
      assertEquals(moved, leadership.valueVersion());
      Leader read = client.leader(name).orElseThrow();
      assertEquals("moved", read.value());
      assertEquals(leadership.term(), read.term());
      assertEquals(moved, read.valueVersion());
      Leader seen = next(told).orElseThrow();
      assertEquals("moved", seen.value());
      assertEquals(leadership.term(), seen.term(), "the same term, not a new leader");
      assertEquals(moved, seen.valueVersion());

      long again = leadership.proclaim("moved again");
      assertTrue(Long.compareUnsigned(again, moved) > 0, again + " after " + moved);
      seen = next(told).orElseThrow();
      assertEquals("moved again", seen.value());
      assertEquals(leadership.term(), seen.term());
      assertEquals(again, seen.valueVersion());
      assertFalse(leadership.isLost(), "proclaiming keeps the leadership");

      assertTrue(other.resign(name, leadership.token()), "was leader");
      LockNotHeldException refused =
          assertThrows(LockNotHeldException.class, () -> leadership.proclaim("too late"));
      assertEquals("not_held", refused.kind());
      assertTrue(leadership.isLost(), "a refused Proclaim ends the leadership here too");
      // Known over now: refused without a call, with the same type and the lost reason as cause.
      LockNotHeldException known =
          assertThrows(LockNotHeldException.class, () -> leadership.proclaim("later still"));
      assertInstanceOf(LockLostException.class, known.getCause());
      assertEquals("moved again", leadership.value(), "a refused value is not taken");
      assertEquals(Optional.empty(), client.leader(name));
      assertEquals(Optional.empty(), next(told), "no leader after the resignation");
      leadership.close();
    } finally {
      observation.close();
    }
  }

  @Test
  void aBoundedCampaignWithdrawsAndTheQueueMovesOn() throws Exception {
    String name = "election/bounded";
    try (Leadership leader = client.campaign(name, "leader", TTL)) {
      DeadlineExceededException late =
          assertThrows(
              DeadlineExceededException.class,
              () -> other.campaign(name, "late", TTL, Duration.ofMillis(300)));
      assertEquals("deadline_exceeded", late.kind());
      assertEquals(leader.term(), client.leader(name).orElseThrow().term());
      assertFalse(leader.isLost());
    }
    // The withdrawn candidate is not in the way: the next one is elected at once.
    try (Leadership next = other.campaign(name, "next", TTL, Poll.LIMIT)) {
      assertEquals("next", client.leader(name).orElseThrow().value());
      assertTrue(next.term() > 0);
    }
  }

  @Test
  void resigningByTokenFromOutsideEndsTheLeadershipAndTheSessionLearnsItIsLost() throws Exception {
    String name = "election/by-token";
    Leadership leadership = client.campaign(name, "leader", TTL);
    assertTrue(other.resign(name, leadership.token()), "was leader");
    assertFalse(other.resign(name, leadership.token()), "already over");
    LockLostException reason =
        leadership.lost().get(Poll.LIMIT.toMillis(), TimeUnit.MILLISECONDS);
    assertEquals("lost", reason.kind());
    assertTrue(leadership.isLost());
    assertFalse(leadership.resign(), "nothing left to resign");
    leadership.close();
    try (Leadership next = other.campaign(name, "next", TTL, Poll.LIMIT)) {
      assertTrue(Long.compareUnsigned(next.term(), leadership.term()) > 0);
    }
  }

  @Test
  void closingTheClientEndsItsLeadershipAndAStandbyTakesOver() throws Exception {
    String name = "election/closed-client";
    LockClient leaving = LockClient.builder(daemon.address).build();
    Leadership leadership;
    try {
      leadership = leaving.campaign(name, "leaving", TTL);
    } finally {
      leaving.close();
    }
    CompletableFuture<LockLostException> lost = leadership.lost();
    assertNotNull(lost.get(Poll.LIMIT.toMillis(), TimeUnit.MILLISECONDS));
    try (Leadership next = client.campaign(name, "staying", TTL, Poll.LIMIT)) {
      assertTrue(Long.compareUnsigned(next.term(), leadership.term()) > 0);
    }
  }

  @Test
  void aStoppingDaemonEndsTheObservationTheCandidacyAndThenTheLeadership() throws Exception {
    try (Daemon stopping = Daemon.start();
        LockClient via = LockClient.builder(stopping.address).build()) {
      String name = "election/stopping";
      BlockingQueue<Optional<Leader>> told = new LinkedBlockingQueue<>();
      try (Observation observation = via.observe(name, told::add)) {
        assertEquals(Optional.empty(), next(told), "no leader yet, told first");
        Leadership leadership = via.campaign(name, "leader", Duration.ofSeconds(5));
        assertEquals(leadership.term(), next(told).orElseThrow().term());
        Future<Leadership> standby = standBy(via, name, "standby");
        stopping.signal("TERM");
        // The observation ends UNAVAILABLE (observe again elsewhere); a waiting candidate too
        // (campaign again elsewhere); the leadership is kept through the drain, then lost when
        // its grace runs out.
        ExecutionException ended =
            assertThrows(
                ExecutionException.class,
                () -> observation.ended().get(Poll.LIMIT.toMillis(), TimeUnit.MILLISECONDS));
        assertInstanceOf(UnavailableException.class, ended.getCause());
        ExecutionException refused = assertThrows(ExecutionException.class, () -> within(standby));
        assertInstanceOf(UnavailableException.class, refused.getCause());
        assertTrue(((UnavailableException) refused.getCause()).isRetryable());
        LockLostException reason =
            leadership.lost().get(Poll.LIMIT.toMillis(), TimeUnit.MILLISECONDS);
        assertTrue(leadership.draining(), "told `draining` first");
        assertTrue(reason.reason().contains("shutdown grace"), reason.reason());
        assertFalse(leadership.resign(), "nothing left to resign");
        leadership.close();
      }
      stopping.exited().get(Poll.LIMIT.toMillis(), TimeUnit.MILLISECONDS);
    }
  }

  @Test
  void badInputIsRefusedNamingTheField() {
    assertEquals(
        "name",
        assertThrows(InvalidArgumentException.class, () -> client.campaign("", "v", TTL)).field());
    assertEquals(
        "ttl",
        assertThrows(InvalidArgumentException.class, () -> client.campaign("e", "v", null)).field());
    assertEquals(
        "value",
        assertThrows(InvalidArgumentException.class, () -> client.campaign("e", null, TTL)).field());
    assertEquals(
        "name", assertThrows(InvalidArgumentException.class, () -> client.leader("")).field());
    assertEquals(
        "listener",
        assertThrows(InvalidArgumentException.class, () -> client.observe("e", null)).field());
    assertEquals(
        "token",
        assertThrows(InvalidArgumentException.class, () -> client.resign("e", "")).field());
    try (Leadership leadership = client.campaign("election/bad-input", "v", TTL)) {
      assertEquals(
          "value",
          assertThrows(InvalidArgumentException.class, () -> leadership.proclaim(null)).field());
      assertFalse(leadership.isLost(), "a refused argument does not end the leadership");
    }
    // The daemon's own refusals arrive mapped, through the Campaign stream too.
    assertEquals(
        "name",
        assertThrows(InvalidArgumentException.class, () -> client.campaign("bad\u0001", "v", TTL))
            .field());
    assertEquals(
        "ttl",
        assertThrows(
                InvalidArgumentException.class,
                () -> client.campaign("e", "v", Duration.ofMillis(20)))
            .field());
    assertEquals(
        "name",
        assertThrows(InvalidArgumentException.class, () -> client.leader("bad\u0001")).field());
  }
}
