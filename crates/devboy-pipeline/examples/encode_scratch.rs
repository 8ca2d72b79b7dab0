use devboy_pipeline::Tokenizer;
fn main() {
    let t = Tokenizer::O200k;
    for s in std::env::args().skip(1) {
        let s = s.replace("\\n", "\n");
        println!("{:>4} {:?}", t.count(&s), s);
    }
}
