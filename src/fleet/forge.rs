//! The page where a pushed branch becomes a pull request, for the forges whose
//! URLs are known: GitHub, GitLab, Gitea and Codeberg, Bitbucket.

use url::Url;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Forge {
    GitHub,
    GitLab,
    Gitea,
    Bitbucket,
}

fn forge_of(host: &str) -> Option<Forge> {
    let host = host.to_ascii_lowercase();
    match host.as_str() {
        "github.com" => Some(Forge::GitHub),
        "gitlab.com" => Some(Forge::GitLab),
        "codeberg.org" => Some(Forge::Gitea),
        "bitbucket.org" => Some(Forge::Bitbucket),
        // A self-hosted GitLab or Gitea is usually named after itself.
        _ if host.starts_with("gitlab.") => Some(Forge::GitLab),
        _ if host.starts_with("gitea.") => Some(Forge::Gitea),
        _ => None,
    }
}

/// The host and the repository's path (`owner/repo`) of a remote URL: `https://`
/// and `ssh://` URLs, and the scp form `git@host:owner/repo.git`.
fn host_and_path(remote: &str) -> Option<(String, String)> {
    let remote = remote.trim();
    let (host, path) = if remote.contains("://") {
        let url = Url::parse(remote).ok()?;
        if !matches!(url.scheme(), "https" | "http" | "ssh" | "git" | "git+ssh") {
            return None;
        }
        (url.host_str()?.to_string(), url.path().to_string())
    } else {
        // `user@host:path`; a local path has no colon before its first slash.
        let (before, path) = remote.split_once(':')?;
        if before.contains('/') || before.is_empty() {
            return None;
        }
        let host = before.rsplit_once('@').map_or(before, |(_, host)| host);
        (host.to_string(), path.to_string())
    };
    let path = path.trim_matches('/');
    let path = path
        .strip_suffix(".git")
        .unwrap_or(path)
        .trim_end_matches('/');
    (!path.is_empty() && !host.is_empty()).then(|| (host, path.to_string()))
}

/// The compare or new-pull-request page for `branch` into `base` on the forge
/// of `remote` (a remote's URL as `git remote get-url` gives it); `None` for a
/// forge clowder does not know.
pub fn pull_request_url(remote: &str, branch: &str, base: &str) -> Option<String> {
    let (host, path) = host_and_path(remote)?;
    let forge = forge_of(&host)?;
    let mut url = Url::parse(&format!("https://{host}/")).ok()?;
    match forge {
        Forge::GitHub => {
            url.set_path(&format!("{path}/compare/{base}...{branch}"));
            url.query_pairs_mut().append_pair("expand", "1");
        }
        Forge::Gitea => url.set_path(&format!("{path}/compare/{base}...{branch}")),
        Forge::GitLab => {
            url.set_path(&format!("{path}/-/merge_requests/new"));
            url.query_pairs_mut()
                .append_pair("merge_request[source_branch]", branch)
                .append_pair("merge_request[target_branch]", base);
        }
        Forge::Bitbucket => {
            url.set_path(&format!("{path}/pull-requests/new"));
            url.query_pairs_mut()
                .append_pair("source", branch)
                .append_pair("dest", base);
        }
    }
    Some(url.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn github_in_every_remote_form() {
        let want = "https://github.com/acme/app/compare/main...clowder/cats?expand=1";
        for remote in [
            "https://github.com/acme/app.git",
            "https://github.com/acme/app",
            "https://user@github.com/acme/app.git/",
            "git@github.com:acme/app.git",
            "ssh://git@github.com/acme/app.git",
            "ssh://git@github.com:22/acme/app",
        ] {
            assert_eq!(
                pull_request_url(remote, "clowder/cats", "main").as_deref(),
                Some(want),
                "{remote}"
            );
        }
    }

    #[test]
    fn gitlab_gitea_and_bitbucket() {
        assert_eq!(
            pull_request_url("git@gitlab.com:group/sub/app.git", "clowder/a", "main").as_deref(),
            Some(
                "https://gitlab.com/group/sub/app/-/merge_requests/new?merge_request%5Bsource_branch%5D=clowder%2Fa&merge_request%5Btarget_branch%5D=main"
            )
        );
        assert_eq!(
            pull_request_url("https://codeberg.org/me/app.git", "clowder/a", "dev").as_deref(),
            Some("https://codeberg.org/me/app/compare/dev...clowder/a")
        );
        assert_eq!(
            pull_request_url("git@gitea.example.org:me/app.git", "clowder/a", "dev").as_deref(),
            Some("https://gitea.example.org/me/app/compare/dev...clowder/a")
        );
        assert_eq!(
            pull_request_url("git@bitbucket.org:team/app.git", "clowder/a", "main").as_deref(),
            Some("https://bitbucket.org/team/app/pull-requests/new?source=clowder%2Fa&dest=main")
        );
    }

    #[test]
    fn unknown_forges_and_local_paths_give_nothing() {
        for remote in [
            "/srv/git/app.git",
            "../app.git",
            "file:///srv/git/app.git",
            "https://git.example.com/app.git",
            "git@example.com:app.git",
            "",
            "github.com",
        ] {
            assert_eq!(pull_request_url(remote, "b", "main"), None, "{remote}");
        }
    }
}
