#include "tlscert.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int add_ext(X509 *cert, int nid, const char *value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, cert, cert, NULL, NULL, 0);
    X509_EXTENSION *ex = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (!ex) return -1;
    int ok = X509_add_ext(cert, ex, -1);
    X509_EXTENSION_free(ex);
    return ok ? 0 : -1;
}

static X509 *cert_read(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    X509 *c = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    return c;
}

/* Days (rounded down) until the certificate's notAfter; negative once past.
 * ASN1_TIME_diff gives days and seconds of one sign. */
static int days_left(const X509 *c) {
    int days = 0, secs = 0;
    if (!ASN1_TIME_diff(&days, &secs, NULL, X509_get0_notAfter(c))) return -1;
    return secs < 0 ? days - 1 : days;
}

/* An existing certificate of ours worth keeping: readable, key beside it,
 * not a CA, and not about to expire. */
static bool keep_existing(const char *cert_path, const char *key_path) {
    if (access(cert_path, R_OK) != 0 || access(key_path, R_OK) != 0) return false;
    X509 *c = cert_read(cert_path);
    if (!c) return false;
    bool keep = X509_check_ca(c) == 0 && days_left(c) >= TLS_CERT_RENEW_DAYS;
    X509_free(c);
    return keep;
}

/* Appends "; " (after the first) and one formatted warning to warn. */
static void warn_add(char *warn, size_t len, int *n, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void warn_add(char *warn, size_t len, int *n, const char *fmt, ...) {
    size_t used = strlen(warn);
    if (*n && used < len) used += (size_t)snprintf(warn + used, len - used, "; ");
    if (used < len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(warn + used, len - used, fmt, ap);
        va_end(ap);
    }
    (*n)++;
}

int tls_cert_check(const char *cert_path, const char *key_path, char *warn, size_t warnlen) {
    int n = 0;
    warn[0] = 0;
    X509 *c = cert_read(cert_path);
    if (c) {
        int left = days_left(c);
        if (X509_cmp_current_time(X509_get0_notBefore(c)) > 0)
            warn_add(warn, warnlen, &n, "certificate %s is not valid yet", cert_path);
        if (X509_cmp_current_time(X509_get0_notAfter(c)) <= 0)
            warn_add(warn, warnlen, &n, "certificate %s has expired", cert_path);
        else if (left < TLS_CERT_RENEW_DAYS)
            warn_add(warn, warnlen, &n, "certificate %s expires in %d days", cert_path, left);
        X509_free(c);
    }
    struct stat st;
    if (stat(key_path, &st) == 0 && (st.st_mode & 077))
        warn_add(warn, warnlen, &n, "key %s can be read by others than its owner (mode %03o: chmod 600 it)", key_path,
                 (unsigned)(st.st_mode & 0777));
    return n;
}

int tls_cert_ensure(const char *cert_path, const char *key_path, char *err, size_t errlen) {
    if (keep_existing(cert_path, key_path)) return 0;
    int rc = -EIO;
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *cert = X509_new();
    FILE *kf = NULL, *cf = NULL;
    if (!key || !cert) goto done;
    X509_set_version(cert, 2);
    unsigned char serial[16];
    FILE *ur = fopen("/dev/urandom", "rb");
    if (!ur || fread(serial, 1, sizeof serial, ur) != sizeof serial) {
        if (ur) fclose(ur);
        goto done;
    }
    fclose(ur);
    serial[0] &= 0x7f;
    BIGNUM *bn = BN_bin2bn(serial, sizeof serial, NULL);
    if (!bn || !BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert))) {
        BN_free(bn);
        goto done;
    }
    BN_free(bn);
    X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
    X509_gmtime_adj(X509_getm_notAfter(cert), 365L * 24 * 3600);
    X509_set_pubkey(cert, key);
    X509_NAME *name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"peloton-apiserver", -1, -1, 0);
    X509_set_issuer_name(cert, name);
    if (add_ext(cert, NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1") ||
        add_ext(cert, NID_basic_constraints, "critical,CA:FALSE") ||
        add_ext(cert, NID_key_usage, "critical,digitalSignature") ||
        add_ext(cert, NID_ext_key_usage, "serverAuth"))
        goto done;
    if (!X509_sign(cert, key, EVP_sha256())) goto done;
    int kfd = open(key_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (kfd >= 0) fchmod(kfd, 0600); /* a key file that existed keeps its mode through open */
    if (kfd < 0 || !(kf = fdopen(kfd, "w"))) {
        if (kfd >= 0) close(kfd);
        snprintf(err, errlen, "tls: cannot write %s", key_path);
        rc = -errno;
        goto done;
    }
    if (!(cf = fopen(cert_path, "w"))) {
        snprintf(err, errlen, "tls: cannot write %s", cert_path);
        rc = -errno;
        goto done;
    }
    if (!PEM_write_PrivateKey(kf, key, NULL, NULL, 0, NULL, NULL) || !PEM_write_X509(cf, cert)) goto done;
    rc = 0;
done:
    if (rc == -EIO) snprintf(err, errlen, "tls: cannot make a self-signed certificate");
    if (kf) fclose(kf);
    if (cf) fclose(cf);
    X509_free(cert);
    EVP_PKEY_free(key);
    return rc;
}
