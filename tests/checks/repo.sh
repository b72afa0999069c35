#!/bin/bash
# make repo, then check the repository as apt sees it, on this machine
# with private apt states (no guest):
#  - the signatures verify against the keyring it publishes; a private apt
#    with that keyring as Signed-By finds vmw-balloon-dkms and the keyring
#    package in it, and refuses the repository when a Packages file was
#    changed after signing or another key signed it;
#  - its Release names a distribution of its own and a Valid-Until;
#  - the cloud-init user-data is a cloud-config whose keyring is the
#    published one and whose source is the repository's;
#  - history: publishing a newer version keeps the older one (apt offers
#    both), a published file never changes, and a served URI needs a
#    named key;
#  - a key rotation as apt clients live through it: the repository signed
#    by key A, then by A and B (the client, trusting the keyring package's
#    A, takes the keyring package that holds both), then by B alone, which
#    the client then trusts and a client that missed the middle step
#    refuses.
set -euo pipefail
cd "$(dirname "$0")/../.."
tests/lib/need-packages apt gpgv gnupg python3-yaml dpkg-dev
version=$(sed -n 's/^PACKAGE_VERSION="\([^"]*\)"$/\1/p' dkms.conf)
deb=build/deb/vmw-balloon-dkms_${version}_all.deb
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
note() { echo "# $*"; }

repo=$work/repo
make repo REPO_DIR="$repo"
dist=vmw-balloon-dkms
keyring=$repo/vmw-balloon-dkms-archive-keyring.gpg
note "the repository: $(cd "$repo" && find . -path '*/by-hash' -prune -o -type f -print | LC_ALL=C sort | xargs)"

check "InRelease verifies with the published keyring" \
	gpgv --keyring "$keyring" "$repo/dists/$dist/InRelease"
check "Release.gpg verifies with the published keyring" \
	gpgv --keyring "$keyring" "$repo/dists/$dist/Release.gpg" "$repo/dists/$dist/Release"
field() { sed -n "s/^$1: //p" "$repo/dists/$dist/Release"; }
check "Release: Suite and Codename are $dist, not stable" \
	test "$(field Suite) $(field Codename)" = "$dist $dist"
valid_days() { echo $((($(date -d "$(field Valid-Until)" +%s) - $(date +%s)) / 86400)); }
note "Valid-Until: $(field Valid-Until)"
check "Release: Valid-Until 89 to 90 days from now" test "$(valid_days)" -ge 89 -a "$(valid_days)" -le 90
check "the old distribution name, stable, still verifies (sources written by 2.0.x)" \
	gpgv --keyring "$keyring" "$repo/dists/stable/InRelease"
check "the .sources file: Suites $dist, Signed-By the keyring package's file" \
	diff - "$repo/vmw-balloon-dkms.sources" <<EOF
Types: deb
URIs: file:$repo
Suites: $dist
Components: main
Signed-By: /usr/share/keyrings/vmw-balloon-dkms-archive-keyring.gpg
EOF
fpr=$(gpg --batch --with-colons --show-keys "$keyring" | awk -F: '$1 == "fpr" {print $10; exit}')
check "the fingerprints file names the keyring's key" grep -qx "$fpr" "$repo/vmw-balloon-dkms-archive-keyring.fingerprints"

# The cloud-config: what cloud-init would read of it (the files it writes)
user_data=$repo/cloud-init-user-data.yaml
cloud_file() { # cloud_file PATH: the content write_files gives PATH
	python3 -c 'import sys, yaml, base64
text = open(sys.argv[1]).read()
assert text.startswith("#cloud-config\n"), "no #cloud-config line"
for f in yaml.safe_load(text)["write_files"]:
    if f["path"] == sys.argv[2]:
        data = f["content"]
        data = base64.b64decode(data) if f.get("encoding") == "b64" else data.encode()
        sys.stdout.buffer.write(data)' "$user_data" "$1"
}
check "the cloud-init user-data's keyring is the published one" \
	cmp <(cloud_file /usr/share/keyrings/vmw-balloon-dkms-archive-keyring.gpg) "$keyring"
check "the cloud-init user-data's source is the repository's .sources file" \
	cmp <(cloud_file /etc/apt/sources.list.d/vmw-balloon-dkms.sources) "$repo/vmw-balloon-dkms.sources"

# apt_in DIR REPO [KEYRING]: a private apt (its own sources, lists and
# cache under DIR) that knows only REPO, signed-by KEYRING (default: the
# published keyring); sets apt_opts
apt_in() {
	local dir=$1 from=$2 trusted=${3:-$keyring}
	mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" "$dir/parts"
	echo "deb [signed-by=$trusted] file:$from $dist main" >"$dir/sources.list"
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
candidate() { apt-cache "${apt_opts[@]}" policy "$1" | sed -n 's/^  Candidate: //p'; }
apt_in "$work/good" "$repo"
check "apt update accepts the repository" apt-get "${apt_opts[@]}" update
check "apt's candidate is vmw-balloon-dkms $version" test "$(candidate vmw-balloon-dkms)" = "$version"
check "apt can fetch it by name" \
	env -C "$work" apt-get "${apt_opts[@]}" download vmw-balloon-dkms
check "the fetched .deb is the one built" \
	cmp "$work/vmw-balloon-dkms_${version}_all.deb" "$deb"
check "apt's candidate for the keyring package is version 1" test "$(candidate vmw-balloon-dkms-archive-keyring)" = 1
check "apt can fetch the keyring package" \
	env -C "$work" apt-get "${apt_opts[@]}" download vmw-balloon-dkms-archive-keyring
packaged_keyring() { # packaged_keyring DEB: the keyring file the keyring package installs
	dpkg-deb --fsys-tarfile "$1" | tar -xO ./usr/share/keyrings/vmw-balloon-dkms-archive-keyring.gpg
}
check "the keyring package installs the published keyring in /usr/share/keyrings" \
	cmp <(packaged_keyring "$work/vmw-balloon-dkms-archive-keyring_1_all.deb") "$keyring"

# A Packages file changed after signing: apt must refuse it.
cp -a "$repo" "$work/tampered"
# every copy of the amd64 index: Packages, Packages.gz and their by-hash copies
index=$work/tampered/dists/$dist/main/binary-amd64
sed 's/^Version: .*/Version: 99.0.0/' "$index/Packages" >"$work/Packages.tampered"
for f in "$index"/Packages* "$index"/by-hash/*/*; do
	if gzip -t "$f" 2>/dev/null; then gzip -9n <"$work/Packages.tampered" >"$f"; else cp "$work/Packages.tampered" "$f"; fi
done
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
	-o "$work/foreign/dists/$dist/InRelease" "$work/foreign/dists/$dist/Release"
rm -f "$work/foreign/dists/$dist/Release.gpg"
apt_in "$work/bad2" "$work/foreign"
check "apt refuses the repository signed by another key" refused

# History: a newer version published into the same repository.
new=$(awk -F. '{print $1 "." $2 "." $3 + 1}' <<<"$version")
new_deb=$(tests/lib/bumped-deb "$new" "$work/bumped" | tail -n 1)
old_index=$(sha256sum <"$repo/dists/$dist/main/binary-amd64/Packages" | cut -d' ' -f1)
debian/make-repo "$repo" "$new_deb" >/dev/null
note "the pool: $(cd "$repo/pool/main" && echo *)"
apt_in "$work/good" "$repo"
check "after publishing $new, apt update accepts the repository" apt-get "${apt_opts[@]}" update
check "apt offers $version and $new" test "$(apt-cache "${apt_opts[@]}" madison vmw-balloon-dkms |
	awk -F'|' '{gsub(/ /, "", $2); print $2}' | sort -V | xargs)" = "$version $new"
check "the candidate is $new" test "$(candidate vmw-balloon-dkms)" = "$new"
check "$version can still be fetched by version (a downgrade)" \
	env -C "$work" apt-get "${apt_opts[@]}" download "vmw-balloon-dkms=$version"
check "the previous Packages index stays fetchable by hash" \
	test -f "$repo/dists/$dist/main/binary-amd64/by-hash/SHA256/$old_index"
check "no second keyring package while the key is the same" \
	test "$(find "$repo/pool/main" -name '*archive-keyring*' | wc -l)" = 1
cp "$deb" "$work/changed.deb" && echo >>"$work/changed.deb"
mkdir -p "$work/changed" && cp "$work/changed.deb" "$work/changed/vmw-balloon-dkms_${version}_all.deb"
refuses_changed() {
	local out
	out=$(debian/make-repo "$repo" "$work/changed/vmw-balloon-dkms_${version}_all.deb" 2>&1) && return 1
	echo "$out"
	grep -q "published already, with other contents" <<<"$out" && cmp "$deb" "$repo/pool/main/${deb##*/}"
}
check "a published version with other bytes is refused, the pool unchanged" refuses_changed
refuses_unnamed_key() {
	local out
	out=$(env -u VMB_SIGNING_KEY VMB_REPO_URI=https://apt.example.invalid/vmb debian/make-repo "$work/served" "$deb" 2>&1) && return 1
	echo "$out"
	grep -q "set VMB_SIGNING_KEY" <<<"$out" && test ! -e "$work/served/dists"
}
check "a repository for an https URI without a named key is refused" refuses_unnamed_key
check "... and made when the local test key is named" \
	env VMB_SIGNING_KEY=local-test VMB_REPO_URI=https://apt.example.invalid/vmb debian/make-repo "$work/served" "$deb"

# A key rotation, A to B, in a repository of its own.
rot=$work/rotation
gpg --batch --passphrase '' --quick-gen-key "rotation key A" rsa2048 sign never 2>/dev/null
gpg --batch --passphrase '' --quick-gen-key "rotation key B" rsa2048 sign never 2>/dev/null
fpr_of() { gpg --batch --with-colons --list-keys "$1" | awk -F: '$1 == "fpr" {print $10; exit}'; }
key_a=$(fpr_of "rotation key A") key_b=$(fpr_of "rotation key B")
# client_keyring DIR: the keyring that the client DIR's installed keyring package holds
client=$work/client
mkdir -p "$client"
VMB_SIGNING_KEY=$key_a debian/make-repo "$rot" "$deb" >/dev/null 2>"$work/log" || cat "$work/log"
cp "$rot/vmw-balloon-dkms-archive-keyring.gpg" "$client/keyring.gpg" # what the first boot writes
take_keyring() { # apt update, then the keyring package's candidate fetched and its keyring installed
	apt-get "${apt_opts[@]}" update &&
		rm -f "$client"/*.deb &&
		env -C "$client" apt-get "${apt_opts[@]}" download vmw-balloon-dkms-archive-keyring &&
		packaged_keyring "$client"/vmw-balloon-dkms-archive-keyring_*_all.deb >"$client/keyring.gpg.new" &&
		mv "$client/keyring.gpg.new" "$client/keyring.gpg"
}
apt_in "$client/apt" "$rot" "$client/keyring.gpg"
check "rotation: signed by A, the client takes keyring package 1" take_keyring
cp "$client/keyring.gpg" "$work/keyring-1.gpg"
VMB_SIGNING_KEY="$key_a $key_b" debian/make-repo "$rot" >/dev/null 2>"$work/log" || cat "$work/log"
signatures() { gpg --batch --status-fd 1 --verify "$rot/dists/$dist/InRelease" 2>/dev/null | awk '$2 == "VALIDSIG" {print $3}' | LC_ALL=C sort | xargs; }
check "rotation: the repository is signed by A and B" test "$(signatures)" = "$(printf '%s\n' "$key_a" "$key_b" | LC_ALL=C sort | xargs)"
check "rotation: the client, trusting A only, accepts it and takes keyring package 2" take_keyring
check "rotation: keyring package 2 holds A and B" test "$(gpg --batch --with-colons --show-keys "$client/keyring.gpg" |
	awk -F: '$1 == "fpr" && !s[$10]++ {print $10}' | LC_ALL=C sort | xargs)" = "$(printf '%s\n' "$key_a" "$key_b" | LC_ALL=C sort | xargs)"
VMB_SIGNING_KEY=$key_b debian/make-repo "$rot" >/dev/null 2>"$work/log" || cat "$work/log"
check "rotation: the repository is signed by B alone" test "$(signatures)" = "$key_b"
check "rotation: the client accepts it, and takes keyring package 3 (B only)" take_keyring
check "rotation: keyring package 3 holds B alone" test "$(gpg --batch --with-colons --show-keys "$client/keyring.gpg" |
	awk -F: '$1 == "pub" {p = 1} $1 == "fpr" && p {print $10; p = 0}' | xargs)" = "$key_b"
apt_in "$work/late" "$rot" "$work/keyring-1.gpg"
check "rotation: a client that still trusts A alone refuses it" refused

echo "$passed passed, $failed failed"
((failed == 0))
