#![allow(unused)]

use redisson_lock::{locked, Error};

#[locked(name = "orders")]
async fn f() -> Result<(), Error> {
    Ok(())
}

fn main() {}
