#![allow(unused)]

use redisson_lock::{locked, Client, Error};

#[locked(client = client, name = "orders:{idd}")]
async fn a(client: &Client, id: u64) -> Result<(), Error> {
    Ok(())
}

#[locked(client = client, name = "orders:{id")]
async fn b(client: &Client, id: u64) -> Result<(), Error> {
    Ok(())
}

#[locked(client = client, name = "orders:{id + 1}")]
async fn c(client: &Client, id: u64) -> Result<(), Error> {
    Ok(())
}

fn main() {}
