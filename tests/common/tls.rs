//! Test rig for TLS: a throwaway CA and certificates made with the `openssl` command line, and a
//! TLS-only `redis-server` (`--port 0 --tls-port P`) on a free loopback port, stopped by PID.
#![allow(dead_code)]

use std::{
    net::TcpStream,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use crate::common::redis_server::free_port;

/// A directory of PEM files: `ca.crt`, `server.crt/key` (127.0.0.1 and localhost),
/// `wrongname.crt/key` (only `wrong.example`), `expired.crt/key`, `client.crt/key`, and a second,
/// unrelated CA `other-ca.crt`.
pub struct Certs {
    pub dir: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("run openssl (install the openssl package)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An EC P-256 key and a signing request.
fn key_and_csr(dir: &Path, name: &str, cn: &str) {
    openssl(
        dir,
        &[
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
            "-subj",
            &format!("/CN={cn}"),
        ],
    );
}

fn self_signed_ca(dir: &Path, name: &str) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.crt"),
            "-days",
            "2",
            "-subj",
            &format!("/CN={name}"),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    );
}

fn sign(dir: &Path, name: &str, ext: &str, days: &str) {
    std::fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            &format!("{name}.crt"),
            "-days",
            days,
            "-extfile",
            &format!("{name}.ext"),
        ],
    );
}

/// Signs `name.csr` with the test CA for a validity window in the past (`openssl ca` takes
/// `-startdate/-enddate`; `openssl x509 -days` cannot go backwards, and OpenSSL 3.0 lacks
/// `x509 -not_before/-not_after`): an expired certificate.
fn sign_expired(dir: &Path, name: &str, ext: &str) {
    std::fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
    std::fs::write(
        dir.join("expired-ca.cnf"),
        "[ ca ]\ndefault_ca = throwaway\n[ throwaway ]\ndatabase = expired-index.txt\n\
         new_certs_dir = .\nserial = expired-serial\ndefault_md = sha256\npolicy = any\n\
         [ any ]\ncommonName = supplied\n",
    )
    .unwrap();
    std::fs::write(dir.join("expired-index.txt"), "").unwrap();
    std::fs::write(dir.join("expired-serial"), "01\n").unwrap();
    openssl(
        dir,
        &[
            "ca",
            "-batch",
            "-config",
            "expired-ca.cnf",
            "-cert",
            "ca.crt",
            "-keyfile",
            "ca.key",
            "-in",
            &format!("{name}.csr"),
            "-out",
            &format!("{name}.crt"),
            "-startdate",
            "20200101000000Z",
            "-enddate",
            "20200102000000Z",
            "-extfile",
            &format!("{name}.ext"),
            "-notext",
        ],
    );
}

impl Certs {
    pub fn make() -> Certs {
        let dir = std::env::temp_dir().join(format!(
            "redisson-lock-tls-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        self_signed_ca(&dir, "ca");
        self_signed_ca(&dir, "other-ca");
        let server =
            "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n";
        key_and_csr(&dir, "server", "localhost");
        sign(
            &dir,
            "server",
            &format!("{server}subjectAltName=IP:127.0.0.1,DNS:localhost\n"),
            "2",
        );
        key_and_csr(&dir, "wrongname", "wrong.example");
        sign(
            &dir,
            "wrongname",
            &format!("{server}subjectAltName=DNS:wrong.example\n"),
            "2",
        );
        // Right name and CA, validity 2020-01-01 to 2020-01-02.
        key_and_csr(&dir, "expired", "localhost");
        sign_expired(
            &dir,
            "expired",
            &format!("{server}subjectAltName=IP:127.0.0.1,DNS:localhost\n"),
        );
        key_and_csr(&dir, "client", "lock-client");
        sign(
            &dir,
            "client",
            "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=clientAuth\n",
            "2",
        );
        Certs { dir }
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    pub fn pem(&self, file: &str) -> Vec<u8> {
        std::fs::read(self.path(file)).unwrap()
    }
}

impl Drop for Certs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A TLS-only redis-server. Killed (by PID) on drop.
pub struct TlsRedis {
    child: Option<Child>,
    pub port: u16,
    dir: PathBuf,
}

impl TlsRedis {
    /// Serves `cert` (a name in `certs`, e.g. `server`); `mutual` asks clients for a certificate
    /// signed by the CA.
    pub fn start(certs: &Certs, cert: &str, mutual: bool, extra: &[&str]) -> TlsRedis {
        for _ in 0..20 {
            let port = free_port();
            if port == 6379 {
                continue;
            }
            let dir = certs.dir.join(format!("data-{port}"));
            std::fs::create_dir_all(&dir).unwrap();
            let mut child = Command::new("redis-server")
                .args(["--port", "0", "--tls-port", &port.to_string()])
                .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .args(["--daemonize", "no", "--protected-mode", "no"])
                .arg("--tls-cert-file")
                .arg(certs.path(&format!("{cert}.crt")))
                .arg("--tls-key-file")
                .arg(certs.path(&format!("{cert}.key")))
                .arg("--tls-ca-cert-file")
                .arg(certs.path("ca.crt"))
                .args(["--tls-auth-clients", if mutual { "yes" } else { "no" }])
                .arg("--dir")
                .arg(&dir)
                .args(extra)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("run redis-server");
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut up = false;
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    up = true;
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            if up {
                return TlsRedis {
                    child: Some(child),
                    port,
                    dir,
                };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("could not start a TLS redis-server");
    }

    /// `rediss://127.0.0.1:<port>`
    pub fn url(&self) -> String {
        format!("rediss://127.0.0.1:{}", self.port)
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
