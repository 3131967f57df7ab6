// streams.rs embeds streams/*.toml at compile time; rebuild when they change.
fn main() {
    println!("cargo:rerun-if-changed=../streams");
}
