# shellcheck shell=bash
# scripts/lib.sh holds what scripts/test and scripts/smoke share; source it
# from the module root.

# npm_install installs the npm packages of project (a directory holding
# package-lock.json) with npm ci. npm ci wipes and reinstalls node_modules, so
# it runs only when the lock has changed since the last install. The stamp
# lives inside node_modules: remove the directory and the stamp goes with it.
npm_install() {
	local project=$1 stamp want
	stamp=$project/node_modules/.troupe-lock-sha256
	want=$(sha256sum "$project/package-lock.json" | cut -d' ' -f1)
	if [[ -f $stamp && $(<"$stamp") == "$want" ]]; then
		echo "up to date"
	else
		(cd "$project" && npm ci --no-audit --no-fund)
		echo "$want" >"$stamp"
	fi
}

# TOOLS_BIN is where the scripts install the Go commands they pin (go
# install with GOBIN): inside the checkout, so nothing lands in the user's
# GOPATH/bin, and first on PATH, so the pinned build is the one that runs.
TOOLS_BIN=$PWD/.tools/bin
export PATH=$TOOLS_BIN:$PATH

# The protobuf toolchain of the node-to-node messages (cluster/): Debian's
# protoc and protoc-gen-go at the version of google.golang.org/protobuf in
# go.mod (the generated code and its runtime must agree). scripts/test
# installs both; scripts/genproto checks them before generating.
readonly PROTOBUF_COMPILER_VERSION=3.21.12-3
readonly PROTOC_GEN_GO_VERSION=v1.36.12

# go_tool_install PKG VERSION installs the Go command PKG (a package path
# whose last element names the binary) at VERSION into TOOLS_BIN, unless
# the binary there was built from that version (go version -m says so).
go_tool_install() {
	local pkg=$1 version=$2 bin have
	bin=$TOOLS_BIN/${pkg##*/}
	if [[ -x $bin ]]; then
		have=$(go version -m "$bin" | awk '$1 == "mod" { print $3; exit }')
		if [[ $have == "$version" ]]; then
			echo "${pkg##*/} $version: up to date"
			return 0
		fi
	fi
	GOBIN=$TOOLS_BIN go install "$pkg@$version"
}

# install_protoc_gen_go installs the pinned protoc-gen-go into TOOLS_BIN.
install_protoc_gen_go() {
	go_tool_install google.golang.org/protobuf/cmd/protoc-gen-go "$PROTOC_GEN_GO_VERSION"
}
