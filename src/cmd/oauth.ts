/** `auth.oauth` from the config, as the gateway's resource server: a JWKS file is read here, once. */
import { readFileSync } from 'node:fs';
import type { JSONWebKeySet } from 'jose';
import type { OAuthConfig } from '../config/schema.js';
import { createOAuthVerifier, type OAuthVerifier } from '../gateway/oauth.js';
import { AppError } from '../shared/errors.js';

export function loadOAuth(config: OAuthConfig | undefined): OAuthVerifier | undefined {
  if (!config) return undefined;
  const { jwksUrl, jwksFile, ...rest } = config;
  return createOAuthVerifier({
    ...rest,
    jwks: jwksUrl !== undefined ? { url: jwksUrl } : { keys: readJwks(jwksFile!) },
  });
}

function readJwks(path: string): JSONWebKeySet {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw new AppError('CONFIG_INVALID', `auth.oauth.jwksFile: cannot read ${path} as JSON`, { cause: e });
  }
  const keys = (parsed as { keys?: unknown }).keys;
  if (!Array.isArray(keys) || keys.length === 0) {
    throw new AppError('CONFIG_INVALID', `auth.oauth.jwksFile: ${path} is not a JWKS ({"keys": [...]})`);
  }
  return parsed as JSONWebKeySet;
}
