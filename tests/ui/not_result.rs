#![allow(unused)]

use redisson_lock::{locked, Client};

#[locked(client = client, name = "orders")]
async fn a(client: &Client) -> u32 {
    1
}

#[locked(client = client, name = "orders")]
async fn b(client: &Client) {}

fn main() {}
