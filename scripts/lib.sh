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
