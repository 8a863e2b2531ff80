//! One pass of the scheduler before a gRPC connection writes, so that the
//! answers of calls finishing together leave in one system call.
//!
//! hyper drives each HTTP/2 connection from one task, and every call on it
//! from a task of its own. A call that finishes wakes the connection's task,
//! and tokio runs a task woken that way next (its LIFO slot): the
//! connection wrote each answer on its own, one `writev` per answer, though
//! the batch reply of a master finishes many calls in the same pass. The
//! first write of a turn now returns `Pending` after waking its own task,
//! which tokio puts at the back of the run queue: the calls already woken
//! finish first, their answers join h2's buffer, and the connection writes
//! them all at once. No timer: with nothing else ready the write goes out
//! after one pass. It wraps the outermost stream, above TLS (whose own
//! buffer would otherwise take the first write and send it at the flush),
//! and only on the gRPC port: the HTTP gateway's HTTP/1.1 answers one call
//! at a time per connection, with nothing to join. Measured in
//! docs/benchmarks.md ("One pass before a connection writes").

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::Connected;

/// Whether the connection has already given way once for its pending
/// write. Touched only by the task that writes to the connection.
#[derive(Debug, Default)]
pub(crate) struct WriteTurn {
    yielded: bool,
}

impl WriteTurn {
    /// `Ready` when the write may go to the socket now; `Pending` (the
    /// task already woken again) the first time for each write.
    pub(crate) fn poll_turn(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// Records the stream's answer: a write that went out ends the turn
    /// (the next one gives way again); one the socket could not take
    /// keeps it, so a full socket is not made to wait twice.
    pub(crate) fn wrote<T>(&mut self, written: &Poll<T>) {
        self.yielded = written.is_pending();
    }
}

/// A connection whose writes each give way once ([`WriteTurn`]); reads,
/// flushes, shutdown and the connect info are the inner stream's.
#[derive(Debug)]
pub(crate) struct TakingTurns<S> {
    inner: S,
    turn: WriteTurn,
}

impl<S> TakingTurns<S> {
    pub(crate) fn new(inner: S) -> TakingTurns<S> {
        TakingTurns {
            inner,
            turn: WriteTurn::default(),
        }
    }
}

impl<S: Connected> Connected for TakingTurns<S> {
    type ConnectInfo = S::ConnectInfo;

    fn connect_info(&self) -> S::ConnectInfo {
        self.inner.connect_info()
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for TakingTurns<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for TakingTurns<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        ready!(this.turn.poll_turn(cx));
        let written = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.turn.wrote(&written);
        written
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        ready!(this.turn.poll_turn(cx));
        let written = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.turn.wrote(&written);
        written
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::{TakingTurns, WriteTurn};
    use std::future::poll_fn;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake, Waker};

    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// The first try of each write gives way once and wakes its task; the
    /// retry writes; a write the socket took starts a new turn.
    #[test]
    fn each_write_gives_way_once() {
        let count = Arc::new(Count::default());
        let waker = Waker::from(Arc::clone(&count));
        let mut cx = Context::from_waker(&waker);
        let mut turn = WriteTurn::default();

        assert!(turn.poll_turn(&mut cx).is_pending());
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "woken again");
        assert!(turn.poll_turn(&mut cx).is_ready());
        turn.wrote(&Poll::Ready(10_usize));

        assert!(turn.poll_turn(&mut cx).is_pending());
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
    }

    /// A socket that could not take the write has the task registered for
    /// writability already: the retry goes straight to it.
    #[test]
    fn a_full_socket_is_not_waited_for_twice() {
        let count = Arc::new(Count::default());
        let waker = Waker::from(Arc::clone(&count));
        let mut cx = Context::from_waker(&waker);
        let mut turn = WriteTurn::default();

        assert!(turn.poll_turn(&mut cx).is_pending());
        assert!(turn.poll_turn(&mut cx).is_ready());
        turn.wrote(&Poll::<usize>::Pending);
        assert!(turn.poll_turn(&mut cx).is_ready());
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
    }

    /// Through a real stream on the runtime: each write is tried twice
    /// (the task rescheduled in between), and its bytes arrive whole.
    #[tokio::test]
    async fn a_stream_taking_turns_writes_on_the_second_try() {
        use tokio::io::{AsyncReadExt, AsyncWrite};
        let (near, mut far) = tokio::io::duplex(64);
        let mut conn = TakingTurns::new(near);
        for message in [&b"first"[..], b"second"] {
            let mut tries = 0;
            let written = poll_fn(|cx| {
                tries += 1;
                Pin::new(&mut conn).poll_write(cx, message)
            })
            .await
            .expect("write");
            assert_eq!((written, tries), (message.len(), 2));
            let mut read = vec![0; message.len()];
            far.read_exact(&mut read).await.expect("read");
            assert_eq!(read, message);
        }
    }
}
