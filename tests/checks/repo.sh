#!/bin/bash
# make repo, then check the repository as apt sees it: the signatures
# verify against the keyring it publishes, a private apt with that keyring
# as signed-by finds vmw-balloon-dkms in it, and apt refuses the repository
# when a Packages file was changed after signing or when it is signed by
# another key. The cloud-init user-data it carries is a cloud-config whose
# key is the published one and whose source is the repository's.
set -euo pipefail
cd "$(dirname "$0")/../.."
tests/lib/need-packages apt gpgv gnupg python3-yaml
version=$(sed -n 's/^PACKAGE_VERSION="\([^"]*\)"$/\1/p' dkms.conf)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
check() { # check NAME COMMAND...
	local name=$1
	shift
	if "$@" >"$work/out" 2>&1; then
		echo "ok $((passed + failed + 1)) - $name"
		passed=$((passed + 1))
	else
		echo "not ok $((passed + failed + 1)) - $name"
		sed 's/^/#   /' "$work/out" | tail -n 20
		failed=$((failed + 1))
	fi
}

make repo
repo=$PWD/build/repo
keyring=$repo/vmw-balloon-dkms-archive-keyring.gpg

check "InRelease verifies with the published keyring" \
	gpgv --keyring "$keyring" "$repo/dists/stable/InRelease"
check "Release.gpg verifies with the published keyring" \
	gpgv --keyring "$keyring" "$repo/dists/stable/Release.gpg" "$repo/dists/stable/Release"
check "the .sources file names the keyring as Signed-By" \
	grep -qx 'Signed-By: /etc/apt/keyrings/vmw-balloon-dkms-archive-keyring.gpg' "$repo/vmw-balloon-dkms.sources"

# The cloud-config: what cloud-init would read of it (the files it writes)
user_data=$repo/cloud-init-user-data.yaml
cloud_file() { # cloud_file PATH: the content write_files gives PATH
	python3 -c 'import sys, yaml
text = open(sys.argv[1]).read()
assert text.startswith("#cloud-config\n"), "no #cloud-config line"
files = {f["path"]: f["content"] for f in yaml.safe_load(text)["write_files"]}
sys.stdout.write(files[sys.argv[2]])' "$user_data" "$1"
}
check "the cloud-init user-data is a cloud-config that writes the key and the source" \
	cloud_file /etc/apt/sources.list.d/vmw-balloon-dkms.sources
check "the cloud-init user-data's key is the published keyring's" \
	cmp <(cloud_file /etc/apt/keyrings/vmw-balloon-dkms-archive-keyring.asc | gpg --batch --dearmor) "$keyring"
cloud_source_is_ours() {
	local sources
	sources=$(cloud_file /etc/apt/sources.list.d/vmw-balloon-dkms.sources) &&
		grep -qx "URIs: file:$repo" <<<"$sources" &&
		grep -qx "Signed-By: /etc/apt/keyrings/vmw-balloon-dkms-archive-keyring.asc" <<<"$sources"
}
check "the cloud-init user-data's source is the repository's, signed by that key" cloud_source_is_ours

# apt_in DIR REPO: a private apt (its own sources, lists and cache under
# DIR) that knows only REPO, signed-by the published keyring
apt_in() {
	local dir=$1 from=$2
	shift 2
	mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" "$dir/parts"
	echo "deb [signed-by=$keyring] file:$from stable main" >"$dir/sources.list"
	: >"$dir/status"
	apt_opts=(
		-o "Dir::Etc::SourceList=$dir/sources.list"
		-o "Dir::Etc::SourceParts=$dir/parts"
		-o "Dir::Etc::Preferences=/dev/null"
		-o "Dir::Etc::PreferencesParts=$dir/parts"
		-o "Dir::State::Lists=$dir/lists"
		-o "Dir::State::status=$dir/status"
		-o "Dir::Cache=$dir/cache"
		-o "APT::Architecture=amd64"
		-o "APT::Sandbox::User=root"
		-o "Debug::NoLocking=true"
	)
}
apt_in "$work/good" "$repo"
check "apt update accepts the repository" apt-get "${apt_opts[@]}" update
policy=$(apt-cache "${apt_opts[@]}" policy vmw-balloon-dkms 2>&1 || true)
sed 's/^/#   /' <<<"$policy"
check "apt's candidate is vmw-balloon-dkms $version" \
	grep -qx "  Candidate: $version" <<<"$policy"
check "apt can fetch it by name" \
	env -C "$work" apt-get "${apt_opts[@]}" download vmw-balloon-dkms
check "the fetched .deb is the one built" \
	cmp "$work/vmw-balloon-dkms_${version}_all.deb" "build/deb/vmw-balloon-dkms_${version}_all.deb"

# A Packages file changed after signing: apt must refuse it.
cp -a "$repo" "$work/tampered"
packages=$work/tampered/dists/stable/main/binary-amd64/Packages
sed -i 's/^Version: .*/Version: 99.0.0/' "$packages"
gzip -9nf <"$packages" >"$packages.gz"
apt_in "$work/bad1" "$work/tampered"
# refused: apt update fails and leaves apt nothing to install from it
refused() {
	! apt-get "${apt_opts[@]}" update &&
		! apt-cache "${apt_opts[@]}" show vmw-balloon-dkms
}
check "apt refuses a Packages file changed after signing" refused

# The same repository signed by a key the keyring does not hold.
cp -a "$repo" "$work/foreign"
export GNUPGHOME=$work/gnupg
mkdir -m 700 "$GNUPGHOME"
gpg --batch --passphrase '' --quick-gen-key "someone else" rsa2048 sign never 2>/dev/null
gpg --batch --yes --local-user "someone else" --clearsign \
	-o "$work/foreign/dists/stable/InRelease" "$work/foreign/dists/stable/Release"
rm -f "$work/foreign/dists/stable/Release.gpg"
apt_in "$work/bad2" "$work/foreign"
check "apt refuses the repository signed by another key" refused

echo "$passed passed, $failed failed"
((failed == 0))
