//! A real sshd on a free port of 127.0.0.1 for the tests that reach a host
//! over ssh, with a key of the test's own.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use tempfile::TempDir;

use super::{DEADLINE, cannot_run, wait_until};

/// Debian's sshd, on a free port of 127.0.0.1, for this test's own key.
pub struct Sshd {
    child: Child,
    pub port: u16,
    dir: TempDir,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Sshd {
    /// None (said) where it cannot run: no sshd, or not root.
    pub fn start() -> Option<Sshd> {
        let sshd = PathBuf::from("/usr/sbin/sshd");
        if !sshd.exists() {
            cannot_run("no /usr/sbin/sshd (Debian's openssh-server; .ci/run installs it)");
            return None;
        }
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            cannot_run("sshd for this test runs as root (as in CI)");
            return None;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let keygen = |file: &str| {
            let status = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(dir.path().join(file))
                .status()
                .expect("ssh-keygen");
            assert!(status.success(), "ssh-keygen failed");
        };
        keygen("host_key");
        keygen("client_key");
        std::fs::copy(
            dir.path().join("client_key.pub"),
            dir.path().join("authorized_keys"),
        )
        .expect("authorized_keys");
        let _ = std::fs::create_dir_all("/run/sshd");
        let port = free_port();
        let config = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {dir}/host_key\nAuthorizedKeysFile {dir}/authorized_keys\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPidFile {dir}/sshd.pid\n",
            dir = dir.path().display()
        );
        std::fs::write(dir.path().join("sshd_config"), config).expect("sshd_config");
        let child = Command::new(&sshd)
            .args(["-D", "-e", "-f"])
            .arg(dir.path().join("sshd_config"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start sshd");
        let listening = wait_until(DEADLINE, || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        assert!(listening, "sshd never listened on 127.0.0.1:{port}");
        Some(Sshd { child, port, dir })
    }

    /// `CLOWDER_SSH`: ssh with this test's key, knowing no host key file.
    pub fn ssh_command(&self) -> String {
        format!(
            "ssh -F /dev/null -i {}/client_key -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no -o LogLevel=ERROR",
            self.dir.path().display()
        )
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}
