// The PKCS#11 (Cryptoki) interface from Debian's libp11-kit-dev, and the few calls ProfileEscrow makes through a
// module loaded at run time (dlopen): no PKCS#11 library is linked. Key custody only (docs/operations.md, "Key
// custody" and "Apple's key in custody"): find a token by label, log in, find or create a sensitive,
// non-extractable AES-256 key, and encrypt or decrypt with CKM_AES_GCM inside the token; import Apple's P-256
// private key as sensitive and not extractable, and sign with CKM_ECDSA inside the token. Every function returns a
// CK_RV; the Swift side names it.
#include <p11-kit/pkcs11.h>
#include <dlfcn.h>
#include <string.h>

/// Not a Cryptoki code: the module could not be loaded, or has no C_GetFunctionList.
#define PROFILE_ESCROW_CKR_MODULE_NOT_LOADED 0x8E5C0001UL
/// Not a Cryptoki code: no token with that label.
#define PROFILE_ESCROW_CKR_TOKEN_NOT_FOUND 0x8E5C0002UL
/// Not a Cryptoki code: no AES key with that label.
#define PROFILE_ESCROW_CKR_KEY_NOT_FOUND 0x8E5C0003UL
/// Not a Cryptoki code: more than one key with that label.
#define PROFILE_ESCROW_CKR_KEY_AMBIGUOUS 0x8E5C0004UL
/// Not a Cryptoki code: a key with that label is already in the token (an import never replaces one).
#define PROFILE_ESCROW_CKR_KEY_EXISTS 0x8E5C0005UL

/// Loads `path` (once: dlopen returns the same handle again) and initialises it. The module stays loaded for the
/// process's life: unloading a module that started threads (SoftHSM2's OpenSSL) is not safe.
static inline CK_RV profile_escrow_p11_load(const char *path, CK_FUNCTION_LIST_PTR *functions) {
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) return PROFILE_ESCROW_CKR_MODULE_NOT_LOADED;
    CK_C_GetFunctionList get = (CK_C_GetFunctionList)dlsym(handle, "C_GetFunctionList");
    if (get == NULL) return PROFILE_ESCROW_CKR_MODULE_NOT_LOADED;
    CK_RV rv = get(functions);
    if (rv != CKR_OK) return rv;
    CK_C_INITIALIZE_ARGS args;
    memset(&args, 0, sizeof(args));
    args.flags = CKF_OS_LOCKING_OK;
    rv = (*functions)->C_Initialize(&args);
    return rv == CKR_CRYPTOKI_ALREADY_INITIALIZED ? CKR_OK : rv;
}

/// Opens a read-write session on the token labelled `label` (`label_len` bytes, compared with the label's
/// space padding) and logs in as the user with `pin`.
static inline CK_RV profile_escrow_p11_open(
    CK_FUNCTION_LIST_PTR f, const unsigned char *label, unsigned long label_len,
    const unsigned char *pin, unsigned long pin_len, CK_SESSION_HANDLE *session
) {
    if (label_len > 32) return PROFILE_ESCROW_CKR_TOKEN_NOT_FOUND;
    unsigned char padded[32];
    memset(padded, ' ', sizeof(padded));
    memcpy(padded, label, label_len);
    CK_ULONG count = 0;
    CK_RV rv = f->C_GetSlotList(CK_TRUE, NULL, &count);
    if (rv != CKR_OK) return rv;
    if (count == 0) return PROFILE_ESCROW_CKR_TOKEN_NOT_FOUND;
    CK_SLOT_ID slots[64];
    if (count > 64) count = 64;
    rv = f->C_GetSlotList(CK_TRUE, slots, &count);
    if (rv != CKR_OK) return rv;
    for (CK_ULONG i = 0; i < count; i++) {
        CK_TOKEN_INFO info;
        if (f->C_GetTokenInfo(slots[i], &info) != CKR_OK) continue;
        if (memcmp(info.label, padded, sizeof(padded)) != 0) continue;
        rv = f->C_OpenSession(slots[i], CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, session);
        if (rv != CKR_OK) return rv;
        rv = f->C_Login(*session, CKU_USER, (unsigned char *)pin, pin_len);
        if (rv != CKR_OK && rv != CKR_USER_ALREADY_LOGGED_IN) {
            f->C_CloseSession(*session);
            return rv;
        }
        return CKR_OK;
    }
    return PROFILE_ESCROW_CKR_TOKEN_NOT_FOUND;
}

/// Logs out and closes the session.
static inline void profile_escrow_p11_close(CK_FUNCTION_LIST_PTR f, CK_SESSION_HANDLE session) {
    f->C_Logout(session);
    f->C_CloseSession(session);
}

/// Finds the one key of class `key_class` and type `key_type` labelled `label` in the token:
/// PROFILE_ESCROW_CKR_KEY_NOT_FOUND when there is none, PROFILE_ESCROW_CKR_KEY_AMBIGUOUS when there are more.
static inline CK_RV profile_escrow_p11_find_object(
    CK_FUNCTION_LIST_PTR f, CK_SESSION_HANDLE session, CK_OBJECT_CLASS key_class, CK_KEY_TYPE key_type,
    const unsigned char *label, unsigned long label_len, CK_OBJECT_HANDLE *key
) {
    CK_ATTRIBUTE search[] = {
        {CKA_CLASS, &key_class, sizeof(key_class)},
        {CKA_KEY_TYPE, &key_type, sizeof(key_type)},
        {CKA_LABEL, (void *)label, label_len},
    };
    CK_RV rv = f->C_FindObjectsInit(session, search, 3);
    if (rv != CKR_OK) return rv;
    CK_OBJECT_HANDLE found[2];
    CK_ULONG count = 0;
    rv = f->C_FindObjects(session, found, 2, &count);
    f->C_FindObjectsFinal(session);
    if (rv != CKR_OK) return rv;
    if (count > 1) return PROFILE_ESCROW_CKR_KEY_AMBIGUOUS;
    if (count == 0) return PROFILE_ESCROW_CKR_KEY_NOT_FOUND;
    *key = found[0];
    return CKR_OK;
}

/// Finds the one AES secret key labelled `label` in the token; with `create`, makes it when there is none: a
/// token object, private, AES-256, CKA_SENSITIVE true, CKA_EXTRACTABLE false, for encryption and decryption only.
static inline CK_RV profile_escrow_p11_find_key(
    CK_FUNCTION_LIST_PTR f, CK_SESSION_HANDLE session, const unsigned char *label, unsigned long label_len,
    int create, CK_OBJECT_HANDLE *key, int *created
) {
    CK_OBJECT_CLASS secret_class = CKO_SECRET_KEY;
    CK_KEY_TYPE aes = CKK_AES;
    *created = 0;
    CK_RV rv = profile_escrow_p11_find_object(f, session, secret_class, aes, label, label_len, key);
    if (rv != PROFILE_ESCROW_CKR_KEY_NOT_FOUND || !create) return rv;
    CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
    CK_ULONG length = 32;
    CK_ATTRIBUTE template[] = {
        {CKA_CLASS, &secret_class, sizeof(secret_class)},
        {CKA_KEY_TYPE, &aes, sizeof(aes)},
        {CKA_LABEL, (void *)label, label_len},
        {CKA_VALUE_LEN, &length, sizeof(length)},
        {CKA_TOKEN, &yes, sizeof(yes)},
        {CKA_PRIVATE, &yes, sizeof(yes)},
        {CKA_SENSITIVE, &yes, sizeof(yes)},
        {CKA_EXTRACTABLE, &no, sizeof(no)},
        {CKA_ENCRYPT, &yes, sizeof(yes)},
        {CKA_DECRYPT, &yes, sizeof(yes)},
        {CKA_WRAP, &no, sizeof(no)},
        {CKA_UNWRAP, &no, sizeof(no)},
        {CKA_SIGN, &no, sizeof(no)},
        {CKA_VERIFY, &no, sizeof(no)},
    };
    CK_MECHANISM generate = {CKM_AES_KEY_GEN, NULL, 0};
    rv = f->C_GenerateKey(session, &generate, template, sizeof(template) / sizeof(template[0]), key);
    if (rv == CKR_OK) *created = 1;
    return rv;
}

/// Reads the key's CKA_SENSITIVE and CKA_EXTRACTABLE: a key that could leave the token is refused.
static inline CK_RV profile_escrow_p11_key_flags(
    CK_FUNCTION_LIST_PTR f, CK_SESSION_HANDLE session, CK_OBJECT_HANDLE key, CK_BBOOL *sensitive,
    CK_BBOOL *extractable
) {
    CK_ATTRIBUTE attributes[] = {
        {CKA_SENSITIVE, sensitive, sizeof(*sensitive)},
        {CKA_EXTRACTABLE, extractable, sizeof(*extractable)},
    };
    return f->C_GetAttributeValue(session, key, attributes, 2);
}

/// AES-GCM (96-bit IV, 128-bit tag) inside the token: encrypts `input` into `output` (`*output_len` in: its
/// capacity; out: ciphertext || tag) when `encrypt`, else decrypts ciphertext || tag.
static inline CK_RV profile_escrow_p11_gcm(
    CK_FUNCTION_LIST_PTR f, CK_SESSION_HANDLE session, CK_OBJECT_HANDLE key, int encrypt,
    const unsigned char *iv, const unsigned char *aad, unsigned long aad_len,
    const unsigned char *input, unsigned long input_len, unsigned char *output, unsigned long *output_len
) {
    CK_GCM_PARAMS params;
    memset(&params, 0, sizeof(params));
    params.pIv = (unsigned char *)iv;
    params.ulIvLen = 12;
    params.ulIvBits = 96;
    params.pAAD = (unsigned char *)aad;
    params.ulAADLen = aad_len;
    params.ulTagBits = 128;
    CK_MECHANISM mechanism = {CKM_AES_GCM, &params, sizeof(params)};
    CK_ULONG length = *output_len;
    CK_RV rv;
    if (encrypt) {
        rv = f->C_EncryptInit(session, &mechanism, key);
        if (rv != CKR_OK) return rv;
        rv = f->C_Encrypt(session, (unsigned char *)input, input_len, output, &length);
    } else {
        rv = f->C_DecryptInit(session, &mechanism, key);
        if (rv != CKR_OK) return rv;
        rv = f->C_Decrypt(session, (unsigned char *)input, input_len, output, &length);
    }
    *output_len = length;
    return rv;
}

/// The DER of P-256's OID (1.2.840.10045.3.1.7), the CKA_EC_PARAMS of Apple's key.
static const unsigned char profile_escrow_p11_p256_oid[] = {0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07};

/// Imports a P-256 private key (`scalar`, 32 bytes) labelled `label` as a token object: private, CKA_SENSITIVE
/// true, CKA_EXTRACTABLE false, for signing only. Refuses (PROFILE_ESCROW_CKR_KEY_EXISTS) when an EC private key of
/// that label is already there.
static inline CK_RV profile_escrow_p11_import_ec_key(
    CK_FUNCTION_LIST_PTR f, CK_SESSION_HANDLE session, const unsigned char *label, unsigned long label_len,
    const unsigned char *scalar, unsigned long scalar_len, CK_OBJECT_HANDLE *key
) {
    CK_OBJECT_CLASS private_class = CKO_PRIVATE_KEY;
    CK_KEY_TYPE ec = CKK_EC;
    CK_RV rv = profile_escrow_p11_find_object(f, session, private_class, ec, label, label_len, key);
    if (rv == CKR_OK || rv == PROFILE_ESCROW_CKR_KEY_AMBIGUOUS) return PROFILE_ESCROW_CKR_KEY_EXISTS;
    if (rv != PROFILE_ESCROW_CKR_KEY_NOT_FOUND) return rv;
    CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
    CK_ATTRIBUTE template[] = {
        {CKA_CLASS, &private_class, sizeof(private_class)},
        {CKA_KEY_TYPE, &ec, sizeof(ec)},
        {CKA_LABEL, (void *)label, label_len},
        {CKA_EC_PARAMS, (void *)profile_escrow_p11_p256_oid, sizeof(profile_escrow_p11_p256_oid)},
        {CKA_VALUE, (void *)scalar, scalar_len},
        {CKA_TOKEN, &yes, sizeof(yes)},
        {CKA_PRIVATE, &yes, sizeof(yes)},
        {CKA_SENSITIVE, &yes, sizeof(yes)},
        {CKA_EXTRACTABLE, &no, sizeof(no)},
        {CKA_SIGN, &yes, sizeof(yes)},
        {CKA_DECRYPT, &no, sizeof(no)},
        {CKA_UNWRAP, &no, sizeof(no)},
        {CKA_DERIVE, &no, sizeof(no)},
    };
    return f->C_CreateObject(session, template, sizeof(template) / sizeof(template[0]), key);
}

/// Finds the one EC private key labelled `label`.
static inline CK_RV profile_escrow_p11_find_ec_key(
    CK_FUNCTION_LIST_PTR f, CK_SESSION_HANDLE session, const unsigned char *label, unsigned long label_len,
    CK_OBJECT_HANDLE *key
) {
    return profile_escrow_p11_find_object(f, session, CKO_PRIVATE_KEY, CKK_EC, label, label_len, key);
}

/// ECDSA inside the token over a digest the caller made (CKM_ECDSA signs what it is given): `signature` receives
/// r || s (`*signature_len` in: its capacity; out: 64 for P-256).
static inline CK_RV profile_escrow_p11_ecdsa_sign(
    CK_FUNCTION_LIST_PTR f, CK_SESSION_HANDLE session, CK_OBJECT_HANDLE key, const unsigned char *digest,
    unsigned long digest_len, unsigned char *signature, unsigned long *signature_len
) {
    CK_MECHANISM mechanism = {CKM_ECDSA, NULL, 0};
    CK_RV rv = f->C_SignInit(session, &mechanism, key);
    if (rv != CKR_OK) return rv;
    CK_ULONG length = *signature_len;
    rv = f->C_Sign(session, (unsigned char *)digest, digest_len, signature, &length);
    *signature_len = length;
    return rv;
}

/// Asks the token for the key's CKA_VALUE: a sensitive key's value must be refused (CKR_ATTRIBUTE_SENSITIVE).
/// Nothing is copied out (the length query only), so a token that wrongly answers leaks nothing here either.
static inline CK_RV profile_escrow_p11_value_readable(
    CK_FUNCTION_LIST_PTR f, CK_SESSION_HANDLE session, CK_OBJECT_HANDLE key
) {
    CK_ATTRIBUTE value = {CKA_VALUE, NULL, 0};
    return f->C_GetAttributeValue(session, key, &value, 1);
}
