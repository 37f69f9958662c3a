//! The permit-expirable semaphore (Redisson `RPermitExpirableSemaphore`, sync protocol §3; its
//! calls and replies in `calls`):
//! the available permits in `N`, every acquired permit in the sorted set `{N}:timeout` under
//! its 16-byte id with its expiry as the score; expired permits go back to the pool inside the
//! scripts that look (there is no timer).

mod calls;
mod guard;
mod handle;
mod life;
mod take;

pub use guard::PermitGuard;
pub use handle::{PermitExpirableSemaphore, RPermitExpirableSemaphore};
