package dev.durable.dashboard.internal;

import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.Arrays;
import java.util.Base64;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import org.jspecify.annotations.Nullable;

/**
 * Signed double-submit tokens. A page sets a cookie holding {@code nonce.hmac(secret, nonce)} (HttpOnly,
 * SameSite=Strict, scoped to the dashboard's path) and writes the same token into each form; a POST is let
 * through only when its form's token equals its cookie and the signature is the server's. A cross-site
 * page can neither read the cookie nor make one the server signed, and SameSite keeps the browser from
 * sending the cookie with a cross-site POST at all. No session state: any node with the same secret checks it.
 */
public final class Csrf {

    public static final String COOKIE = "durable_dashboard_csrf";
    public static final String FIELD = "_durable_csrf";

    private static final Base64.Encoder B64 = Base64.getUrlEncoder().withoutPadding();
    private static final Base64.Decoder B64D = Base64.getUrlDecoder();

    private final SecretKeySpec key;
    private final SecureRandom random = new SecureRandom();

    public Csrf(byte[] secret) {
        this.key = new SecretKeySpec(secret, "HmacSHA256");
    }

    /** A fresh token. */
    public String mint() {
        byte[] nonce = new byte[18];
        random.nextBytes(nonce);
        return B64.encodeToString(nonce) + "." + B64.encodeToString(sign(nonce));
    }

    /** True when the token is one this server signed. */
    public boolean valid(@Nullable String token) {
        if (token == null || token.length() > 200) {
            return false;
        }
        int dot = token.indexOf('.');
        if (dot <= 0) {
            return false;
        }
        try {
            byte[] nonce = B64D.decode(token.substring(0, dot));
            byte[] mac = B64D.decode(token.substring(dot + 1));
            return MessageDigest.isEqual(mac, sign(nonce));
        } catch (IllegalArgumentException notBase64) {
            return false;
        }
    }

    /** The POST's check: the form's token is the cookie's, and it is signed. */
    public boolean accepts(@Nullable String cookie, @Nullable String field) {
        return cookie != null && field != null
                && MessageDigest.isEqual(cookie.getBytes(StandardCharsets.US_ASCII), field.getBytes(StandardCharsets.US_ASCII))
                && valid(cookie);
    }

    private byte[] sign(byte[] nonce) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(key);
            return Arrays.copyOf(mac.doFinal(nonce), 24);
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA256 is part of every JDK", e);
        }
    }
}
