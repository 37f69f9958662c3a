#![allow(unused)]

use redisson_lock::{locked, Client, Error};

#[locked(client = client, name = "orders", wait = "5 seconds")]
async fn a(client: &Client) -> Result<(), Error> {
    Ok(())
}

#[locked(client = client, name = "orders", lease = 30)]
async fn b(client: &Client) -> Result<(), Error> {
    Ok(())
}

#[locked(client = client, name = "orders", lease = "0s")]
async fn c(client: &Client) -> Result<(), Error> {
    Ok(())
}

fn main() {}
