#![allow(unused)]

use redisson_lock::{locked, Client, Error};

#[locked(client = client, name = "orders", kind = mutex)]
async fn f(client: &Client) -> Result<(), Error> {
    Ok(())
}

fn main() {}
