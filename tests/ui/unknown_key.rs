#![allow(unused)]

use redisson_lock::{locked, Client, Error};

#[locked(client = client, name = "orders", timeout = "5s")]
async fn f(client: &Client) -> Result<(), Error> {
    Ok(())
}

fn main() {}
