#ifndef KIOSK_CCURL_SHIM_H
#define KIOSK_CCURL_SHIM_H

#include <curl/curl.h>

// curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call.
// One wrapper per argument type, each passing exactly the C type the option documents.

typedef size_t (*kiosk_curl_data_callback)(char *buffer, size_t size, size_t count, void *userdata);
typedef int (*kiosk_curl_xferinfo_callback)(void *userdata, curl_off_t dltotal, curl_off_t dlnow,
                                            curl_off_t ultotal, curl_off_t ulnow);

static inline CURLcode kiosk_curl_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode kiosk_curl_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode kiosk_curl_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode kiosk_curl_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode kiosk_curl_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode kiosk_curl_easy_setopt_data_callback(CURL *handle, CURLoption option,
                                                            kiosk_curl_data_callback value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode kiosk_curl_easy_setopt_xferinfo_callback(CURL *handle, CURLoption option,
                                                                kiosk_curl_xferinfo_callback value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode kiosk_curl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode kiosk_curl_easy_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode kiosk_curl_easy_getinfo_pointer(CURL *handle, CURLINFO info, void **value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLMcode kiosk_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

#endif
