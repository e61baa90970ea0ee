//! Keeps the Kubernetes manifests under assets/deploy/kubernetes valid: every YAML
//! file there passes `kubernetes-validate --strict` (offline schemas, from PyPI)
//! against a pinned Kubernetes version, and a broken copy of the StatefulSet is
//! refused by the same check, so that a check that validates nothing cannot pass.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The Kubernetes version whose schemas the manifests must satisfy.
const KUBERNETES_VERSION: &str = "1.30";
/// The tool's version .ci/run installs.
const TOOL: &str = "kubernetes-validate";
const TOOL_PIN: &str = "kubernetes-validate==1.37.0";

/// What the tool said about a set of files.
#[derive(Debug)]
enum Validation {
    Passed(String),
    Refused(String),
    /// Not on PATH.
    Missing,
}

/// Runs the validation the deploy manifests must pass over `files`.
fn validate(files: &[PathBuf]) -> Validation {
    let output = Command::new(TOOL)
        .arg("--strict")
        .args(["--kubernetes-version", KUBERNETES_VERSION])
        .args(files)
        .output();
    let output = match output {
        Ok(output) => output,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Validation::Missing,
        Err(err) => panic!("{TOOL} could not be started: {err}"),
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if output.status.success() {
        Validation::Passed(text)
    } else {
        Validation::Refused(text)
    }
}

/// [`validate`], or `None` (after saying so, and failing under CI) without the tool.
fn validate_or_skip(files: &[PathBuf]) -> Option<Result<String, String>> {
    match validate(files) {
        Validation::Passed(text) => Some(Ok(text)),
        Validation::Refused(text) => Some(Err(text)),
        Validation::Missing => {
            common::cannot_run(&format!(
                "{TOOL} is not on PATH: install it with `python3 -m pip install {TOOL_PIN}` (.ci/run does)"
            ));
            None
        }
    }
}

fn manifests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/deploy/kubernetes")
}

/// Every YAML file of the manifests folder, sorted.
fn manifests() -> Vec<PathBuf> {
    let entries = std::fs::read_dir(manifests_dir()).expect("assets/deploy/kubernetes is readable");
    let mut files: Vec<PathBuf> = entries
        .map(|entry| entry.expect("a readable folder entry").path())
        .filter(|path| {
            let ext = path.extension().and_then(|e| e.to_str());
            matches!(ext, Some("yaml" | "yml"))
        })
        .collect();
    files.sort();
    files
}

fn file_name(path: &Path) -> &str {
    path.file_name().and_then(|n| n.to_str()).unwrap_or("")
}

fn statefulset_text() -> String {
    std::fs::read_to_string(manifests_dir().join("statefulset.yaml"))
        .expect("assets/deploy/kubernetes/statefulset.yaml is readable")
}

/// The StatefulSet with `from` replaced by `to` (once; it must be there), written to
/// a scratch folder; the folder goes with the returned guard.
fn broken_statefulset(from: &str, to: &str) -> (tempfile::TempDir, PathBuf) {
    let text = statefulset_text();
    assert_eq!(
        text.matches(from).count(),
        1,
        "statefulset.yaml should hold `{from}` exactly once"
    );
    let dir = tempfile::tempdir().expect("a scratch folder");
    let path = dir.path().join("statefulset.yaml");
    std::fs::write(&path, text.replacen(from, to, 1)).expect("the broken copy is written");
    (dir, path)
}

#[test]
fn every_manifest_passes_strict_validation() {
    let files = manifests();
    let names: Vec<&str> = files.iter().map(|f| file_name(f)).collect();
    for expected in ["statefulset.yaml", "service.yaml", "configmap.yaml"] {
        assert!(names.contains(&expected), "{expected} missing: {names:?}");
    }
    let Some(result) = validate_or_skip(&files) else {
        return;
    };
    let text = result.unwrap_or_else(|text| panic!("{TOOL} refused the manifests:\n{text}"));
    // The tool only warns about a kind it has no schema for: each resource must be
    // named as passed, or it was not checked at all. kustomization.yaml is kustomize's.
    for name in names.iter().filter(|n| **n != "kustomization.yaml") {
        let passed = text
            .lines()
            .any(|l| l.starts_with("INFO") && l.contains(name) && l.contains(" passed "));
        assert!(passed, "{name} was not validated:\n{text}");
    }
}

#[test]
fn a_statefulset_with_replicas_ten_as_text_is_refused() {
    let (_dir, path) = broken_statefulset("replicas: 1\n", "replicas: \"ten\"\n");
    let Some(result) = validate_or_skip(&[path]) else {
        return;
    };
    let text = result.expect_err("replicas: \"ten\" must be refused");
    assert!(text.contains("spec.replicas"), "{text}");
}

#[test]
fn a_field_kubernetes_does_not_know_is_refused() {
    // Refused only under --strict: checks that the flag reaches the tool.
    let (_dir, path) = broken_statefulset(
        "workingDir: /work/repo\n",
        "workingDir: /work/repo\n          workDir: /work/repo\n",
    );
    let Some(result) = validate_or_skip(&[path]) else {
        return;
    };
    let text = result.expect_err("an unknown container field must be refused");
    assert!(text.contains("'workDir' was unexpected"), "{text}");
}

/// The `- file` entries under `resources:` of kustomization.yaml.
fn kustomize_resources() -> Vec<String> {
    let text = std::fs::read_to_string(manifests_dir().join("kustomization.yaml"))
        .expect("kustomization.yaml is readable");
    text.lines()
        .skip_while(|l| l.trim_end() != "resources:")
        .skip(1)
        .map_while(|l| l.trim_start().strip_prefix("- "))
        .map(|l| l.trim().to_string())
        .collect()
}

#[test]
fn the_kustomization_lists_every_manifest_but_the_secret_example() {
    let mut expected: Vec<String> = manifests()
        .iter()
        .map(|f| file_name(f).to_string())
        .filter(|n| n != "kustomization.yaml" && n != "secret.example.yaml")
        .collect();
    expected.sort();
    let mut listed = kustomize_resources();
    listed.sort();
    assert_eq!(listed, expected, "kustomization.yaml resources");
    let secret = std::fs::read_to_string(manifests_dir().join("secret.example.yaml"))
        .expect("secret.example.yaml is readable");
    for key in [
        "ANTHROPIC_API_KEY: \"PLACEHOLDER",
        "OPENAI_API_KEY: \"PLACEHOLDER",
    ] {
        assert!(secret.contains(key), "secret.example.yaml: {key}…");
    }
}

#[test]
fn the_statefulset_runs_clowder_headless_with_the_secret_and_configmap() {
    let text = statefulset_text();
    for needle in [
        "kind: StatefulSet",
        "serviceName: clowder-host",
        "volumeClaimTemplates:",
        "mountPath: /work\n",
        "runAsNonRoot: true",
        "runAsUser: 1000",
        "fsGroup: 1000",
        "name: clowder-agent-credentials\n                  key: ANTHROPIC_API_KEY\n                  optional: true",
        "name: clowder-agent-credentials\n                  key: OPENAI_API_KEY\n                  optional: true",
        "configMapRef:\n                name: clowder-host",
        "git clone \"$REPO_URL\"",
        r#"args: ["clowder", "--headless", "--stay"]"#,
    ] {
        assert!(text.contains(needle), "statefulset.yaml lacks {needle:?}");
    }
}

#[test]
fn ci_installs_the_pinned_validator() {
    let ci = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/run"))
        .expect(".ci/run is readable");
    assert!(
        ci.contains(&format!("kv={TOOL_PIN}\n")),
        ".ci/run does not pin {TOOL_PIN}"
    );
}
