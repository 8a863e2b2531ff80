//! The protobuf codec of the lock service: tonic's prost codec with small
//! per-call buffers.
//!
//! tonic gives every call an 8 KiB encode buffer and an 8 KiB decode
//! buffer, allocated when the call starts and kept for as long as it lasts.
//! Our messages are a few hundred bytes, and a `Hold` session lasts as long
//! as its lock: at 10,000 sessions those buffers alone were 160 MB of the
//! daemon's memory. The buffers still grow when a message needs it.

use tonic::codec::{BufferSettings, Codec};
use tonic_prost::ProstCodec;

/// Initial size of each call's encode and decode buffer.
const BUFFER_SIZE: usize = 256;
/// tonic's default: how much an encoder writes before yielding.
const YIELD_THRESHOLD: usize = 32 * 1024;

/// [`ProstCodec`] with [`BUFFER_SIZE`] buffers; the generated service and
/// client code use it (`build.rs` names it).
#[derive(Debug)]
pub struct SmallBufferCodec<T, U>(std::marker::PhantomData<(T, U)>);

impl<T, U> Default for SmallBufferCodec<T, U> {
    fn default() -> Self {
        SmallBufferCodec(std::marker::PhantomData)
    }
}

impl<T, U> Codec for SmallBufferCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = <ProstCodec<T, U> as Codec>::Encoder;
    type Decoder = <ProstCodec<T, U> as Codec>::Decoder;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<T, U>::raw_encoder(BufferSettings::new(BUFFER_SIZE, YIELD_THRESHOLD))
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstCodec::<T, U>::raw_decoder(BufferSettings::new(BUFFER_SIZE, YIELD_THRESHOLD))
    }
}
