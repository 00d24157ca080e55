// Stand-in for CANN's ACL runtime header acl/acl.h (tests only; see tests/cpp/README.md): the few names the
// emitted host call sequence uses, declared with their C signatures. Nothing is defined: the CATLASS fragments
// are only syntax-checked, and no test program calls these.
#ifndef TILER_STANDIN_ACL_ACL_H
#define TILER_STANDIN_ACL_ACL_H

#include <cstddef>

typedef void *aclrtStream;
typedef int aclError;
static const int ACL_SUCCESS = 0;

typedef enum aclrtMemMallocPolicy {
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEM_MALLOC_HUGE_ONLY,
    ACL_MEM_MALLOC_NORMAL_ONLY,
} aclrtMemMallocPolicy;

extern "C" {
aclError aclrtMalloc(void **devPtr, std::size_t size, aclrtMemMallocPolicy policy);
aclError aclrtFree(void *devPtr);
aclError aclrtSynchronizeStream(aclrtStream stream);
aclError aclrtGetHardwareSyncAddr(void **addr);
}

#endif
