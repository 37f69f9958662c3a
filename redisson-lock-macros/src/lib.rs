//! The `#[locked(...)]` attribute of `redisson-lock`. Use it as `redisson_lock::locked`; its
//! documentation is there.
//!
//! The attribute only builds the lock and calls one of `Lock::run`, `run_with_lease`,
//! `try_run_for` or `try_run_with_lease`: everything that happens under the lock is written
//! once, in the library.
#![forbid(unsafe_code)]

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as Tokens};
use quote::{quote, quote_spanned};
use syn::{
    parse::{Parse, ParseStream},
    parse_macro_input,
    punctuated::Punctuated,
    spanned::Spanned,
    Expr, ExprLit, FnArg, Ident, ItemFn, Lit, LitStr, Pat, ReturnType, Token, Type,
};

/// Runs an `async fn` under a distributed lock. See `redisson_lock::locked`.
#[proc_macro_attribute]
pub fn locked(attr: TokenStream, item: TokenStream) -> TokenStream {
    let func = parse_macro_input!(item as ItemFn);
    let expanded = syn::parse::<Args>(attr).and_then(|args| expand(args, func.clone()));
    match expanded {
        Ok(tokens) => tokens.into(),
        // The function stays as written, so the one error is the only message.
        Err(e) => {
            let error = e.to_compile_error();
            quote!(#error #func).into()
        }
    }
}

const KEYS: &str = "client, name, wait, lease, kind";
const KINDS: &str = "reentrant, fair, fenced, spin, read, write, non_reentrant, non_reentrant_fair";
const DURATION_HELP: &str =
    "write a duration as a string with a unit: \"500ms\", \"5s\", \"2m\", \"1h\" or \"1m30s\"";

/// The attribute's arguments, each at most once.
#[derive(Default)]
struct Args {
    client: Option<Expr>,
    name: Option<LitStr>,
    wait: Option<Duration>,
    lease: Option<Duration>,
    kind: Option<(Kind, Span)>,
    /// `#[run_once]` only.
    at_least: Option<Duration>,
    /// `#[run_once]` only.
    at_most: Option<Duration>,
}

/// A duration argument: a literal string parsed here, or any expression of type `Duration`.
enum Duration {
    Millis(u64, Span),
    Expr(Expr),
}

#[derive(Clone, Copy)]
enum Kind {
    Reentrant,
    Fair,
    Fenced,
    Spin,
    Read,
    Write,
    NonReentrant,
    NonReentrantFair,
}

impl Parse for Args {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut args = Args::default();
        let pairs = Punctuated::<Pair, Token![,]>::parse_terminated(input)?;
        for Pair { key, value } in pairs {
            let name = key.to_string();
            let duplicate = || {
                syn::Error::new(
                    key.span(),
                    format!("`{name}` is given twice in #[locked(..)]"),
                )
            };
            match name.as_str() {
                "client" => {
                    if args.client.replace(value).is_some() {
                        return Err(duplicate());
                    }
                }
                "name" => {
                    let lit = match value {
                        Expr::Lit(ExprLit {
                            lit: Lit::Str(s), ..
                        }) => s,
                        other => {
                            return Err(syn::Error::new(
                                other.span(),
                                "`name` must be a string literal, e.g. name = \"orders:{id}\" \
                                 (`{arg}` inserts an argument of the function)",
                            ))
                        }
                    };
                    if args.name.replace(lit).is_some() {
                        return Err(duplicate());
                    }
                }
                "wait" | "lease" | "at_least" | "at_most" => {
                    let d = duration(&name, value)?;
                    let slot = match name.as_str() {
                        "wait" => &mut args.wait,
                        "lease" => &mut args.lease,
                        "at_least" => &mut args.at_least,
                        _ => &mut args.at_most,
                    };
                    if slot.replace(d).is_some() {
                        return Err(duplicate());
                    }
                }
                "kind" => {
                    let k = kind(&value)?;
                    if args.kind.replace((k, value.span())).is_some() {
                        return Err(duplicate());
                    }
                }
                _ => {
                    return Err(syn::Error::new(
                        key.span(),
                        format!(
                            "unknown argument `{name}` in #[locked(..)]; expected one of: {KEYS}"
                        ),
                    ))
                }
            }
        }
        Ok(args)
    }
}

/// `key = value`.
struct Pair {
    key: Ident,
    value: Expr,
}

impl Parse for Pair {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let key: Ident = input.call(syn::ext::IdentExt::parse_any)?;
        if !input.peek(Token![=]) {
            return Err(syn::Error::new(
                key.span(),
                format!("expected `{key} = ...`; #[locked] takes `key = value` pairs ({KEYS})"),
            ));
        }
        input.parse::<Token![=]>()?;
        let value: Expr = input.parse()?;
        Ok(Pair { key, value })
    }
}

fn kind(value: &Expr) -> syn::Result<Kind> {
    let word = match value {
        Expr::Path(p) if p.path.get_ident().is_some() => p.path.get_ident().unwrap().to_string(),
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => s.value(),
        other => {
            return Err(syn::Error::new(
                other.span(),
                format!("`kind` is one of: {KINDS}"),
            ))
        }
    };
    Ok(match word.as_str() {
        "reentrant" => Kind::Reentrant,
        "fair" => Kind::Fair,
        "fenced" => Kind::Fenced,
        "spin" => Kind::Spin,
        "read" => Kind::Read,
        "write" => Kind::Write,
        "non_reentrant" => Kind::NonReentrant,
        "non_reentrant_fair" => Kind::NonReentrantFair,
        _ => {
            return Err(syn::Error::new(
                value.span(),
                format!("unknown lock kind `{word}`; expected one of: {KINDS}"),
            ))
        }
    })
}

fn duration(key: &str, value: Expr) -> syn::Result<Duration> {
    match value {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => {
            let millis = parse_duration(&s.value()).map_err(|why| {
                syn::Error::new(
                    s.span(),
                    format!(
                        "invalid `{key}` duration {:?}: {why}; {DURATION_HELP}",
                        s.value()
                    ),
                )
            })?;
            if (key == "lease" || key == "at_most") && millis == 0 {
                return Err(syn::Error::new(
                    s.span(),
                    if key == "lease" {
                        "`lease` must be longer than zero (leave it out for the watchdog)"
                    } else {
                        "`at_most` must be longer than zero"
                    },
                ));
            }
            Ok(Duration::Millis(millis, s.span()))
        }
        Expr::Lit(ExprLit { lit, .. }) => Err(syn::Error::new(
            lit.span(),
            format!("`{key}` needs a unit; {DURATION_HELP}"),
        )),
        other => Ok(Duration::Expr(other)),
    }
}

/// `"1h2m3s400ms"` → milliseconds. Units: `ms`, `s`, `m`, `h`; each number needs one.
fn parse_duration(text: &str) -> Result<u64, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("it is empty".into());
    }
    let mut total: u64 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(format!("expected a number at {rest:?}"));
        }
        let number: u64 = rest[..digits]
            .parse()
            .map_err(|_| "the number is too large".to_string())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let factor = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "" => return Err(format!("{number} has no unit")),
            unit => return Err(format!("unknown unit {unit:?}")),
        };
        rest = &rest[unit_len..];
        total = number
            .checked_mul(factor)
            .and_then(|n| total.checked_add(n))
            .ok_or_else(|| "it is too long".to_string())?;
    }
    Ok(total)
}

/// One piece of a name template.
enum Piece {
    Text(String),
    /// `{arg}` or `{arg.field}`: the expression and the argument it starts with.
    Field(String),
}

fn parse_template(text: &str) -> Result<Vec<Piece>, String> {
    let mut pieces = Vec::new();
    let mut literal = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                literal.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                literal.push('}');
            }
            '{' => {
                let mut field = String::new();
                loop {
                    match chars.next() {
                        Some('}') => break,
                        Some(c) => field.push(c),
                        None => {
                            return Err(
                                "unclosed `{` (write `{{` for a literal brace, e.g. a cluster hash tag)"
                                    .into(),
                            )
                        }
                    }
                }
                if !literal.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut literal)));
                }
                pieces.push(Piece::Field(field.trim().to_owned()));
            }
            '}' => return Err("unmatched `}` (write `}}` for a literal brace)".into()),
            c => literal.push(c),
        }
    }
    if !literal.is_empty() {
        pieces.push(Piece::Text(literal));
    }
    Ok(pieces)
}

/// The argument names of `func` that a template may use (simple bindings and `self`).
fn argument_names(func: &ItemFn) -> Vec<String> {
    func.sig
        .inputs
        .iter()
        .filter_map(|arg| match arg {
            FnArg::Receiver(_) => Some("self".to_owned()),
            FnArg::Typed(t) => match &*t.pat {
                Pat::Ident(p) => Some(p.ident.to_string()),
                _ => None,
            },
        })
        .collect()
}

/// `format!(..)` building the lock name from the template.
fn name_expr(name: &LitStr, func: &ItemFn) -> syn::Result<Tokens> {
    let pieces = parse_template(&name.value())
        .map_err(|why| syn::Error::new(name.span(), format!("lock name template: {why}")))?;
    let known = argument_names(func);
    let mut format = String::new();
    let mut values = Vec::new();
    for piece in pieces {
        match piece {
            Piece::Text(t) => format.push_str(&t.replace('{', "{{").replace('}', "}}")),
            Piece::Field(f) => {
                let root = f.split('.').next().unwrap_or_default().trim();
                let expr: Expr =
                    syn::parse_str(&f)
                        .ok()
                        .filter(is_field_path)
                        .ok_or_else(|| {
                            syn::Error::new(
                                name.span(),
                                format!(
                            "`{{{f}}}` in the lock name is not an argument or an argument's field \
                             (write `{{arg}}` or `{{arg.field}}`; `{{{{` for a literal brace)"
                        ),
                            )
                        })?;
                if !known.iter().any(|k| k == root) {
                    let list = if known.is_empty() {
                        "it has none".to_owned()
                    } else {
                        format!("its arguments are: {}", known.join(", "))
                    };
                    return Err(syn::Error::new(
                        name.span(),
                        format!(
                            "`{{{f}}}` in the lock name: `{root}` is not an argument of `{}`; {list}",
                            func.sig.ident
                        ),
                    ));
                }
                format.push_str("{}");
                values.push(respan(quote!(#expr), name.span()));
            }
        }
    }
    let format = LitStr::new(&format, name.span());
    Ok(quote_spanned!(name.span()=> ::std::format!(#format #(, #values)*)))
}

/// `a`, `a.b`, `a.0.c`: what a name template may insert.
fn is_field_path(e: &Expr) -> bool {
    match e {
        Expr::Path(p) => p.path.get_ident().is_some() || p.path.is_ident("self"),
        Expr::Field(f) => is_field_path(&f.base),
        _ => false,
    }
}

fn respan(tokens: Tokens, span: Span) -> Tokens {
    tokens
        .into_iter()
        .map(|mut t| {
            if let proc_macro2::TokenTree::Group(g) = &t {
                let mut group = proc_macro2::Group::new(g.delimiter(), respan(g.stream(), span));
                group.set_span(span);
                t = proc_macro2::TokenTree::Group(group);
            } else {
                t.set_span(span);
            }
            t
        })
        .collect()
}

/// `true` if `ty` reads as a `Result` (`Result<..>`, `io::Result<..>`, `anyhow::Result<..>`, or
/// any alias whose name ends in `Result`).
fn is_result(ty: &Type) -> bool {
    match ty {
        Type::Path(p) => p
            .path
            .segments
            .last()
            .is_some_and(|s| s.ident.to_string().ends_with("Result")),
        Type::Paren(p) => is_result(&p.elem),
        Type::Group(g) => is_result(&g.elem),
        _ => false,
    }
}

/// Runs an `async fn` at most once across instances (ShedLock's semantics). See
/// `redisson_lock::run_once`.
#[proc_macro_attribute]
pub fn run_once(attr: TokenStream, item: TokenStream) -> TokenStream {
    let func = parse_macro_input!(item as ItemFn);
    let expanded = syn::parse::<Args>(attr).and_then(|args| expand_once(args, func.clone()));
    match expanded {
        Ok(tokens) => tokens.into(),
        Err(e) => {
            let error = e.to_compile_error();
            quote!(#error #func).into()
        }
    }
}

fn duration_tokens(d: &Duration) -> Tokens {
    match d {
        Duration::Millis(ms, span) => {
            quote_spanned!(*span=> ::core::time::Duration::from_millis(#ms))
        }
        Duration::Expr(e) => {
            quote_spanned!(e.span()=> { let __d: ::core::time::Duration = #e; __d })
        }
    }
}

/// The checks both attributes make: an `async fn` returning a `Result`, a client and a name.
fn common(args: &Args, func: &ItemFn, attr: &str) -> syn::Result<(Type, Expr, Tokens)> {
    let sig = &func.sig;
    if sig.asyncness.is_none() {
        return Err(syn::Error::new(
            sig.fn_token.span(),
            format!("#[{attr}] can only be used on an `async fn` (the lock is awaited)"),
        ));
    }
    let ret = match &sig.output {
        ReturnType::Type(_, ty) if is_result(ty) => ty.as_ref().clone(),
        _ => {
            return Err(syn::Error::new(
                sig.ident.span(),
                format!(
                    "#[{attr}] needs a function returning `Result<T, E>` with \
                     `E: From<redisson_lock::Error>`"
                ),
            ))
        }
    };
    let client = args.client.clone().ok_or_else(|| {
        syn::Error::new(
            Span::call_site(),
            format!("#[{attr}] is missing `client = ...`, e.g. client = &self.client"),
        )
    })?;
    let name = args.name.as_ref().ok_or_else(|| {
        syn::Error::new(
            Span::call_site(),
            format!("#[{attr}] is missing `name = \"...\"`, e.g. name = \"report:{{day}}\""),
        )
    })?;
    let name = name_expr(name, func)?;
    Ok((ret, client, name))
}

fn expand_once(args: Args, func: ItemFn) -> syn::Result<Tokens> {
    if args.wait.is_some() || args.lease.is_some() || args.kind.is_some() {
        return Err(syn::Error::new(
            Span::call_site(),
            "#[run_once] takes client, name, at_least and at_most (it never waits: a held name \
             is skipped; the watchdog holds it for at most `at_most`)",
        ));
    }
    let Some(at_most) = args.at_most.as_ref() else {
        return Err(syn::Error::new(
            Span::call_site(),
            "#[run_once] is missing `at_most = \"...\"`: how long the job may run at most",
        ));
    };
    let (ret, client, name) = common(&args, &func, "run_once")?;
    let at_most = duration_tokens(at_most);
    let at_least = args
        .at_least
        .as_ref()
        .map_or_else(|| quote!(::core::time::Duration::ZERO), duration_tokens);
    let client_ty = quote_spanned!(client.span()=> &::redisson_lock::Client);
    let ItemFn {
        attrs,
        vis,
        sig,
        block,
    } = func;
    Ok(quote! {
        #(#attrs)*
        #vis #sig {
            let __redisson_lock_name: ::std::string::String = #name;
            let __redisson_lock_client: #client_ty = #client;
            ::redisson_lock::__private::run_once(
                __redisson_lock_client,
                &__redisson_lock_name,
                #at_least,
                #at_most,
                move || ::redisson_lock::__private::body::<#ret, _>(async move #block),
            )
            .await
        }
    })
}

fn expand(args: Args, func: ItemFn) -> syn::Result<Tokens> {
    if args.at_least.is_some() || args.at_most.is_some() {
        return Err(syn::Error::new(
            Span::call_site(),
            "`at_least` and `at_most` belong to #[run_once(..)], not #[locked(..)]",
        ));
    }
    let sig = &func.sig;
    if sig.asyncness.is_none() {
        return Err(syn::Error::new(
            sig.fn_token.span(),
            "#[locked] can only be used on an `async fn` (the lock is awaited)",
        ));
    }
    let ret = match &sig.output {
        ReturnType::Type(_, ty) if is_result(ty) => ty.as_ref().clone(),
        ReturnType::Type(_, ty) => {
            return Err(syn::Error::new(
                ty.span(),
                "#[locked] needs a function returning `Result<T, E>` with \
                 `E: From<redisson_lock::Error>` (lock errors are returned through it)",
            ))
        }
        ReturnType::Default => {
            return Err(syn::Error::new(
                sig.ident.span(),
                "#[locked] needs a function returning `Result<T, E>` with \
                 `E: From<redisson_lock::Error>`; this one returns `()`",
            ))
        }
    };
    let client = args.client.ok_or_else(|| {
        syn::Error::new(
            Span::call_site(),
            "#[locked] is missing `client = ...`: an expression giving the `&redisson_lock::Client`, \
             e.g. client = &self.client",
        )
    })?;
    let name = args.name.ok_or_else(|| {
        syn::Error::new(
            Span::call_site(),
            "#[locked] is missing `name = \"...\"`: the lock name, e.g. name = \"orders:{id}\"",
        )
    })?;
    let name = name_expr(&name, &func)?;

    let (kind, kind_span) = args.kind.unwrap_or((Kind::Reentrant, Span::call_site()));
    let lock = quote_spanned!(kind_span=> __redisson_lock_client);
    // Every call is an owner of its own: calls exclude each other even as branches of one
    // task (`join_all` over a locked function), and a call never re-enters another's hold.
    let owner = quote!(::redisson_lock::Owner::new());
    let factory = match kind {
        Kind::Reentrant => quote!(#lock.get_lock_with_owner(&__redisson_lock_name, #owner)),
        Kind::Fair => quote!(#lock.get_fair_lock_with_owner(&__redisson_lock_name, #owner)),
        Kind::Fenced => quote!(#lock.get_fenced_lock_with_owner(&__redisson_lock_name, #owner)),
        Kind::Spin => quote!(#lock.get_spin_lock_with(
            &__redisson_lock_name,
            #owner,
            ::core::default::Default::default(),
        )),
        Kind::NonReentrant => {
            quote!(#lock.get_non_reentrant_lock_with_owner(&__redisson_lock_name, #owner))
        }
        Kind::NonReentrantFair => {
            quote!(#lock.get_non_reentrant_fair_lock_with_owner(&__redisson_lock_name, #owner))
        }
        Kind::Read => {
            quote!(#lock
                .get_read_write_lock_with_owner(&__redisson_lock_name, #owner)
                .into_read_lock())
        }
        Kind::Write => {
            quote!(#lock
                .get_read_write_lock_with_owner(&__redisson_lock_name, #owner)
                .into_write_lock())
        }
    };
    let duration = |d: &Duration| match d {
        Duration::Millis(ms, span) => {
            quote_spanned!(*span=> ::core::time::Duration::from_millis(#ms))
        }
        Duration::Expr(e) => {
            quote_spanned!(e.span()=> { let __d: ::core::time::Duration = #e; __d })
        }
    };
    let (method, durations) = match (&args.wait, &args.lease) {
        (None, None) => ("run", vec![]),
        (None, Some(l)) => ("run_with_lease", vec![duration(l)]),
        (Some(w), None) => ("try_run_for", vec![duration(w)]),
        (Some(w), Some(l)) => ("try_run_with_lease", vec![duration(w), duration(l)]),
    };
    // Spanned at the return type: an error type without `From<redisson_lock::Error>` is
    // reported there.
    let method = Ident::new(method, ret.span());
    let client_ty = quote_spanned!(client.span()=> &::redisson_lock::Client);

    let ItemFn {
        attrs,
        vis,
        sig,
        block,
    } = func;
    Ok(quote! {
        #(#attrs)*
        #vis #sig {
            let __redisson_lock_name: ::std::string::String = #name;
            let __redisson_lock_client: #client_ty = #client;
            let __redisson_lock = #factory;
            __redisson_lock
                .#method(#(#durations,)* move || {
                    ::redisson_lock::__private::body::<#ret, _>(async move #block)
                })
                .await
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(500));
        assert_eq!(parse_duration("5s"), Ok(5_000));
        assert_eq!(parse_duration("2m"), Ok(120_000));
        assert_eq!(parse_duration("1h"), Ok(3_600_000));
        assert_eq!(parse_duration("1m30s"), Ok(90_000));
        assert_eq!(parse_duration(" 0s "), Ok(0));
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("5 s").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("5sec").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("99999999999999999999h").is_err());
    }

    #[test]
    fn templates() {
        let p = parse_template("orders:{id}:{{tag}}:{ user.id }").unwrap();
        let shown: Vec<String> = p
            .iter()
            .map(|p| match p {
                Piece::Text(t) => format!("T({t})"),
                Piece::Field(f) => format!("F({f})"),
            })
            .collect();
        assert_eq!(shown, ["T(orders:)", "F(id)", "T(:{tag}:)", "F(user.id)"]);
        assert!(parse_template("a{b").is_err());
        assert!(parse_template("a}b").is_err());
    }
}
