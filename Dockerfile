# troupe's container image: the static binaries of a release build, a
# non-root user, CA certificates, and nothing else (FROM scratch: no shell,
# no package manager). Build it from a checkout after scripts/release:
#
#   scripts/release && podman build -t troupe .      # or docker build
#
# and run it over stdio (an MCP client starts it) or HTTP:
#
#   podman run --rm -i -v "$PWD:/workspace" troupe
#   podman run --rm -p 8080:8080 -e TROUPE_TOKEN -v "$PWD:/workspace" troupe \
#     serve --workspace /workspace --http 0.0.0.0:8080 --bearer-token-env TROUPE_TOKEN
#
# The sandbox needs more than a default container allows to isolate the
# programs it runs: see docs/deploy.md for the options and what degrades
# without them. The tools a command runs (shell.exec, command tools,
# downstream servers) must be in the image too: add them in an image built
# FROM this one.
FROM scratch
# Made by scripts/release: /etc/passwd and /etc/group (root, and troupe as
# 10001) and the CA bundle; then, owned by troupe, its home, /tmp and the
# workspace mount point.
COPY dist/rootfs/ /
COPY --chown=10001:10001 dist/rootfs-troupe/ /
# troupe-sandbox beside troupe: troupe prefers it for every sandboxed run.
COPY dist/troupe dist/troupe-sandbox dist/troupe-cluster /usr/local/bin/
USER 10001:10001
ENV HOME=/home/troupe \
    TMPDIR=/tmp \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
# The audit log and other state: under $HOME/.local/state/troupe; mount a
# volume there to keep them.
VOLUME ["/home/troupe/.local/state"]
WORKDIR /workspace
ENTRYPOINT ["/usr/local/bin/troupe"]
CMD ["serve", "--workspace", "/workspace"]
