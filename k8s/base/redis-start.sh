# Starts the run's Redis (redis.yaml) with one Redis user per role of the run
# (shared/transport/acl.py): the default user off, and for each "ROLE RULES" line of the
# rules file a user zf-ROLE with the password from that role's Secret. The passwords go into
# an ACL file in memory (0600) that redis.conf names: never on a command line, never in a
# manifest, never in the pod's environment.
#
# Paths, the pod's by default (tests/unit/test_k8s_security.py points them elsewhere):
#   ZF_REDIS_CONF       the server's config
#   ZF_REDIS_ACL_RULES  the roles' rules: `python -m zeroforge.shared.transport.acl`
#   ZF_REDIS_ROLE_DIR   one file per role, named ROLE, holding its password (the Secrets)
#   ZF_REDIS_AUTH_DIR   where users.acl is written (an emptyDir in memory)
#   ZF_REDIS_SERVER     the redis-server to run
# Arguments are passed on to redis-server after the config (the test's loopback overrides).
set -eu
conf=${ZF_REDIS_CONF:-/etc/redis/redis.conf}
rules=${ZF_REDIS_ACL_RULES:-/etc/redis/redis-acl-rules.txt}
roles=${ZF_REDIS_ROLE_DIR:-/etc/redis-roles}
out=${ZF_REDIS_AUTH_DIR:-/run/redis-auth}
placeholder=REPLACE-ME-see-docs-cluster-md
acl="$out/users.acl"

refuse() {
  rm -f "$acl.new"
  echo "${HOSTNAME:-redis}: $* (docs/cluster.md, \"The Secrets\")" >&2
  exit 1
}

[ -r "$rules" ] || refuse "no role rules at $rules"
umask 077
# Written beside the file and renamed: a half-written ACL file is never what Redis loads.
# the default user: off (no connection can be it), its rights only for Redis's own replay
# of the AOF, which Redis 7.0-7.2 check against it (DEFAULT_USER in acl.py says why)
printf 'user default off resetkeys ~* resetchannels &* +@all\n' > "$acl.new"
seen=" "
count=0
while read -r role rule || [ -n "$role" ]; do
  [ -n "$role" ] || continue
  case "$role" in *[!a-z]*) refuse "bad role name '$role' in $rules" ;; esac
  secret="zeroforge-redis-$role"
  [ -r "$roles/$role" ] || refuse "no password for role $role at $roles/$role (the Secret $secret)"
  password=$(cat "$roles/$role")
  case "$password" in
    "" | "$placeholder")
      refuse "the Secret $secret holds no password or still the placeholder" ;;
    # An ACL line is split on spaces and quotes: keep to characters that need no quoting
    # (openssl rand -hex and -base64 make such passwords).
    *[!A-Za-z0-9._~+/=-]*)
      refuse "the Secret $secret's password has characters other than letters, digits and ._~+/=-" ;;
  esac
  # One role's password must not open another role's user.
  case "$seen" in *" $password "*) refuse "the Secret $secret holds another role's password" ;; esac
  seen="$seen$password "
  printf 'user zf-%s on >%s %s\n' "$role" "$password" "$rule" >> "$acl.new"
  count=$((count + 1))
done < "$rules"
[ "$count" -gt 0 ] || refuse "no roles in $rules"
mv "$acl.new" "$acl"
unset password seen
exec "${ZF_REDIS_SERVER:-redis-server}" "$conf" "$@"
