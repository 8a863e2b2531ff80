//! A first call: acquire a lock, print its fence, release it.
//!
//! With the dev daemon running (`scripts/dev.sh`, the README's quick start):
//!
//! ```sh
//! cargo run -p redlockd-client --example first_call            # 127.0.0.1:50051
//! cargo run -p redlockd-client --example first_call -- HOST:PORT
//! ```
//!
//! The address may also come from `REDLOCK_ADDR`.

use redlockd_client::Client;
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), redlockd_client::Error> {
    let addr = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("REDLOCK_ADDR").ok())
        .unwrap_or_else(|| "127.0.0.1:50051".into());
    let client = Client::connect(addr).await?;
    let lock = client
        .acquire("orders/42", Duration::from_secs(10))
        .wait(Duration::from_secs(5))
        .await?;
    println!("fence {} valid for {:?}", lock.fence(), lock.validity());
    // ... the critical section: pass lock.fence() with every write ...
    client.release(&lock).await?;
    Ok(())
}
