-- Who may use `taskplug serve`, and who submitted what (taskplug.service._tokens, ._auth).
-- An API token is `tp_<id>_<secret>`: the id finds the row, the secret is kept only as its SHA-256 and
-- compared in constant time. Revoking deletes the row, and with it every web session signed in with it.

CREATE TABLE taskplug_tokens (
    id text PRIMARY KEY,                          -- the token's public part: finds the row without the secret
    name text NOT NULL UNIQUE,                    -- what people call it, and the identity it records
    role text NOT NULL CHECK (role IN ('read', 'submit', 'admin')),
    secret_sha256 bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz,                       -- NULL: until revoked
    last_used_at timestamptz                      -- refreshed at most once a minute per server
);

CREATE TABLE taskplug_sessions (
    id text PRIMARY KEY,                          -- a signed-in browser's cookie is `<id>.<secret>`
    token_id text NOT NULL REFERENCES taskplug_tokens ON DELETE CASCADE,
    secret_sha256 bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);

CREATE INDEX taskplug_sessions_token ON taskplug_sessions (token_id);

-- The identity that submitted (or relaunched) the execution: `token:<name>`, `proxy:<user>`,
-- `oidc:<email or sub>`, `local`; NULL for executions submitted before this migration or straight to the table.
ALTER TABLE taskplug_executions ADD COLUMN submitted_by text;
