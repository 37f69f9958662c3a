#![allow(unused)]

use redisson_lock::{locked, Client};

#[derive(Debug)]
struct MyError;

#[locked(client = client, name = "orders")]
async fn f(client: &Client) -> Result<(), MyError> {
    Ok(())
}

fn main() {}
