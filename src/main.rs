fn main() {
    println!("bloscfs");
}
