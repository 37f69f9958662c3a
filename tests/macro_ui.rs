//! Compile-fail tests of `#[locked(..)]`: each bad use gives a readable error at the right place.
//! The expected messages are in `tests/ui/*.stderr` (regenerate with `TRYBUILD=overwrite`).

#[test]
fn bad_attribute_arguments_are_readable_compile_errors() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
