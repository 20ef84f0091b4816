/* dmlconform's DirectML runner: one long-lived Windows process that creates, compiles,
 * initializes and dispatches DirectML operators on request, over stdin/stdout.
 *
 * It names no operator. Python packs every desc into DirectML's C layout (an "arena" of bytes
 * whose pointers are arena offsets, plus the list of where those pointers are) and sends the
 * input tensors' bytes in binding order; the runner turns the offsets into pointers, hands the
 * root DML_OPERATOR_DESC at offset 0 to CreateOperator and returns HRESULTs, timings and the
 * output buffers. So a new operator or a new member type is a change to the spec and the packer,
 * never to this file.
 *
 * Command line: runner.exe PATH\TO\DirectML.dll [--wave-ops=off|LANES]. DirectML picks some of
 * its FLOAT32 reductions by the device's D3D12_FEATURE_D3D12_OPTIONS1.WaveOps, even when it runs
 * DXBC shaders; every GPU reports WaveOps, vkd3d 1.6 (this stack) does not. --wave-ops=LANES makes
 * the device report WaveOps with LANES lanes, --wave-ops=off makes it report none; without the
 * flag DirectML sees the device's own answer. The runner does it by replacing CheckFeatureSupport
 * (ID3D12Device vtable slot 13) with a wrapper that edits only that one answer.
 *
 * Built by `dmlconform directml setup` with mingw-w64; mingw ships d3d12.h and dxgi.h but no
 * DirectML.h, so the few DirectML declarations the runner needs are written out below (from
 * the interface definitions published in Microsoft's DirectML.h).
 *
 * Protocol (little-endian). Request: u32 magic 'DMLQ', u32 command, u64 payload length,
 * payload. Reply: u32 magic 'DMLA', u32 command, u64 payload length, payload.
 *   INFO  (1): payload u32 n, n x u32 feature levels (highest first), u32 m, m x u32 data types.
 *              Reply: text lines "key=value" (adapter, max_feature_level, data_type_N, then
 *              wave_ops / wave_lanes_min / wave_lanes_max / total_lanes as DirectML sees them
 *              and device_wave_ops / device_wave_lanes_min / ..._max / device_total_lanes as
 *              the device itself answers).
 *   RUN   (2): payload u32 mode (0 create, 1 create+compile, 2 execute), u32 execution flags,
 *              u64 arena length, arena, u32 relocation count, u64 offsets, u32 input count,
 *              per input u64 size (NO_BINDING for a null tensor), u32 owned (1 when the tensor
 *              has DML_TENSOR_FLAG_OWNED_BY_DML: bound to the initializer, not the execution)
 *              and its bytes, u32 output count, per output u64 size (or NO_BINDING).
 *              Reply: u32 stage reached (STAGE_*), i32 HRESULT, 5 x f64 milliseconds (create,
 *              compile, initialize, execute, read back), u32 output count, per output u64 size
 *              and its bytes (outputs are pre-filled with 0xFF bytes, a NaN in every float type,
 *              so an output DirectML never wrote cannot pass for a result).
 *   SLEEP (3): payload u32 milliseconds; replies after sleeping (tests the client's timeout).
 *   CRASH (4): dereferences a null pointer (tests the client's crash recovery).
 *   QUIT  (5): replies and exits.
 * After a reply whose stage is STAGE_DEVICE_REMOVED the runner exits: the device is gone.
 */

#define COBJMACROS
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#include <initguid.h>
#include <d3d12.h>
#include <dxgi1_4.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

/* ---------------------------------------------------------------------------------------- */
/* DirectML declarations: only what the runner calls.                                        */

typedef struct { UINT Type; const void *Desc; } DML_OPERATOR_DESC;
typedef struct { UINT Type; const void *Desc; } DML_BINDING_DESC;
typedef struct { ID3D12Resource *Buffer; UINT64 Offset; UINT64 SizeInBytes; } DML_BUFFER_BINDING;
typedef struct { UINT RequiredDescriptorCount; UINT64 TemporaryResourceSize; UINT64 PersistentResourceSize; } DML_BINDING_PROPERTIES;
typedef struct { UINT RequestedFeatureLevelCount; const UINT *RequestedFeatureLevels; } DML_FEATURE_QUERY_FEATURE_LEVELS;
typedef struct { UINT MaxSupportedFeatureLevel; } DML_FEATURE_DATA_FEATURE_LEVELS;
typedef struct { UINT DataType; } DML_FEATURE_QUERY_TENSOR_DATA_TYPE_SUPPORT;
typedef struct { BOOL IsSupported; } DML_FEATURE_DATA_TENSOR_DATA_TYPE_SUPPORT;

enum { DML_BINDING_TYPE_NONE = 0, DML_BINDING_TYPE_BUFFER = 1, DML_BINDING_TYPE_BUFFER_ARRAY = 2 };
enum { DML_FEATURE_TENSOR_DATA_TYPE_SUPPORT = 0, DML_FEATURE_FEATURE_LEVELS = 1 };

typedef struct IDMLDispatchable IDMLDispatchable;

typedef struct {
    IDMLDispatchable *Dispatchable;
    D3D12_CPU_DESCRIPTOR_HANDLE CPUDescriptorHandle;
    D3D12_GPU_DESCRIPTOR_HANDLE GPUDescriptorHandle;
    UINT SizeInDescriptors;
} DML_BINDING_TABLE_DESC;

/* Every DirectML interface starts with IUnknown and IDMLObject's four methods. */
#define DML_OBJECT_METHODS(T)                                                                   \
    HRESULT(STDMETHODCALLTYPE *QueryInterface)(T *, REFIID, void **);                         \
    ULONG(STDMETHODCALLTYPE *AddRef)(T *);                                                     \
    ULONG(STDMETHODCALLTYPE *Release)(T *);                                                    \
    HRESULT(STDMETHODCALLTYPE *GetPrivateData)(T *, REFGUID, UINT *, void *);                 \
    HRESULT(STDMETHODCALLTYPE *SetPrivateData)(T *, REFGUID, UINT, const void *);             \
    HRESULT(STDMETHODCALLTYPE *SetPrivateDataInterface)(T *, REFGUID, IUnknown *);            \
    HRESULT(STDMETHODCALLTYPE *SetName)(T *, LPCWSTR);
#define DML_CHILD_METHODS(T) DML_OBJECT_METHODS(T) HRESULT(STDMETHODCALLTYPE *GetDevice)(T *, REFIID, void **);

typedef struct IDMLDevice { const struct IDMLDeviceVtbl *lpVtbl; } IDMLDevice;
typedef struct IDMLOperator { const struct IDMLOperatorVtbl *lpVtbl; } IDMLOperator;
typedef struct IDMLCompiledOperator { const struct IDMLDispatchableVtbl *lpVtbl; } IDMLCompiledOperator;
typedef struct IDMLOperatorInitializer { const struct IDMLDispatchableVtbl *lpVtbl; } IDMLOperatorInitializer;
struct IDMLDispatchable { const struct IDMLDispatchableVtbl *lpVtbl; };
typedef struct IDMLBindingTable { const struct IDMLBindingTableVtbl *lpVtbl; } IDMLBindingTable;
typedef struct IDMLCommandRecorder { const struct IDMLCommandRecorderVtbl *lpVtbl; } IDMLCommandRecorder;

struct IDMLDeviceVtbl {
    DML_OBJECT_METHODS(IDMLDevice)
    HRESULT(STDMETHODCALLTYPE *CheckFeatureSupport)(IDMLDevice *, UINT, UINT, const void *, UINT, void *);
    HRESULT(STDMETHODCALLTYPE *CreateOperator)(IDMLDevice *, const DML_OPERATOR_DESC *, REFIID, void **);
    HRESULT(STDMETHODCALLTYPE *CompileOperator)(IDMLDevice *, IDMLOperator *, UINT, REFIID, void **);
    HRESULT(STDMETHODCALLTYPE *CreateOperatorInitializer)(IDMLDevice *, UINT, IDMLCompiledOperator *const *, REFIID, void **);
    HRESULT(STDMETHODCALLTYPE *CreateCommandRecorder)(IDMLDevice *, REFIID, void **);
    HRESULT(STDMETHODCALLTYPE *CreateBindingTable)(IDMLDevice *, const DML_BINDING_TABLE_DESC *, REFIID, void **);
    HRESULT(STDMETHODCALLTYPE *Evict)(IDMLDevice *, UINT, void *const *);
    HRESULT(STDMETHODCALLTYPE *MakeResident)(IDMLDevice *, UINT, void *const *);
    HRESULT(STDMETHODCALLTYPE *GetDeviceRemovedReason)(IDMLDevice *);
    HRESULT(STDMETHODCALLTYPE *GetParentDevice)(IDMLDevice *, REFIID, void **);
};
struct IDMLOperatorVtbl { DML_CHILD_METHODS(IDMLOperator) };
/* GetBindingProperties returns a struct from a C++ member function: the MSVC ABI passes a
 * hidden pointer to the result after `this`. */
struct IDMLDispatchableVtbl {
    DML_CHILD_METHODS(IDMLDispatchable)
    DML_BINDING_PROPERTIES *(STDMETHODCALLTYPE *GetBindingProperties)(IDMLDispatchable *, DML_BINDING_PROPERTIES *);
    HRESULT(STDMETHODCALLTYPE *Reset)(IDMLDispatchable *, UINT, IDMLCompiledOperator *const *); /* initializer only */
};
struct IDMLBindingTableVtbl {
    DML_CHILD_METHODS(IDMLBindingTable)
    void(STDMETHODCALLTYPE *BindInputs)(IDMLBindingTable *, UINT, const DML_BINDING_DESC *);
    void(STDMETHODCALLTYPE *BindOutputs)(IDMLBindingTable *, UINT, const DML_BINDING_DESC *);
    void(STDMETHODCALLTYPE *BindTemporaryResource)(IDMLBindingTable *, const DML_BINDING_DESC *);
    void(STDMETHODCALLTYPE *BindPersistentResource)(IDMLBindingTable *, const DML_BINDING_DESC *);
    HRESULT(STDMETHODCALLTYPE *Reset)(IDMLBindingTable *, const DML_BINDING_TABLE_DESC *);
};
struct IDMLCommandRecorderVtbl {
    DML_CHILD_METHODS(IDMLCommandRecorder)
    void(STDMETHODCALLTYPE *RecordDispatch)(IDMLCommandRecorder *, ID3D12CommandList *, IDMLDispatchable *, IDMLBindingTable *);
};

DEFINE_GUID(IID_IDMLDevice_, 0x6dbd6437, 0x96fd, 0x423f, 0xa9, 0x8c, 0xae, 0x5e, 0x7c, 0x2a, 0x57, 0x3f);
DEFINE_GUID(IID_IDMLOperator_, 0x26caae7a, 0x3081, 0x4633, 0x95, 0x81, 0x22, 0x6f, 0xbe, 0x57, 0x69, 0x5d);
DEFINE_GUID(IID_IDMLCompiledOperator_, 0x6b15e56a, 0xbf5c, 0x4902, 0x92, 0xd8, 0xda, 0x3a, 0x65, 0x0a, 0xfe, 0xa4);
DEFINE_GUID(IID_IDMLOperatorInitializer_, 0x427c1113, 0x435c, 0x469c, 0x86, 0x76, 0x4d, 0x5d, 0xd0, 0x72, 0xf8, 0x13);
DEFINE_GUID(IID_IDMLBindingTable_, 0x29c687dc, 0xde74, 0x4e3b, 0xab, 0x00, 0x11, 0x68, 0xf2, 0xfc, 0x3c, 0xfc);
DEFINE_GUID(IID_IDMLCommandRecorder_, 0xe6857a76, 0x2e3e, 0x4fdd, 0xbf, 0xf4, 0x5d, 0x2b, 0xa1, 0x0f, 0xb4, 0x53);

typedef HRESULT(WINAPI *DMLCreateDevice1Fn)(ID3D12Device *, UINT, UINT, REFIID, void **);
typedef HRESULT(WINAPI *DMLCreateDeviceFn)(ID3D12Device *, UINT, REFIID, void **);

/* ---------------------------------------------------------------------------------------- */

#define MAGIC_REQUEST 0x514C4D44u /* "DMLQ" */
#define MAGIC_REPLY 0x414C4D44u   /* "DMLA" */
#define NO_BINDING UINT64_MAX
#define TENSOR_ALIGNMENT 256u
#define MAX_BUFFER (1ull << 40) /* a binding past 1 TiB is a garbled request, not a tensor */
enum { CMD_INFO = 1, CMD_RUN = 2, CMD_SLEEP = 3, CMD_CRASH = 4, CMD_QUIT = 5 };
enum { MODE_CREATE = 0, MODE_COMPILE = 1, MODE_EXECUTE = 2 };
enum {
    STAGE_OK = 0, STAGE_CREATE = 1, STAGE_COMPILE = 2, STAGE_INITIALIZE = 3, STAGE_EXECUTE = 4,
    STAGE_DEVICE_REMOVED = 5, STAGE_BAD_REQUEST = 6, STAGE_OUT_OF_MEMORY = 7
};

static HANDLE g_in, g_out;
static ID3D12Device *g_d3d;
static IDMLDevice *g_dml;
static ID3D12CommandQueue *g_queue;
static ID3D12CommandAllocator *g_alloc;
static ID3D12GraphicsCommandList *g_list;
static ID3D12Fence *g_fence;
static UINT64 g_fence_value;
static HANDLE g_event;
static IDMLCommandRecorder *g_recorder;
static char g_adapter[256] = "unknown";
static char g_error[512];

static void die(const char *what, HRESULT hr)
{
    fprintf(stderr, "dmlconform runner: %s failed: 0x%08lx\n", what, (unsigned long)hr);
    fflush(stderr);
    ExitProcess(2);
}

static int read_exact(void *buf, size_t n)
{
    char *p = buf;
    while (n) {
        DWORD chunk = n > (1u << 30) ? (1u << 30) : (DWORD)n, got = 0;
        if (!ReadFile(g_in, p, chunk, &got, NULL) || got == 0) return 0;
        p += got;
        n -= got;
    }
    return 1;
}

static void write_exact(const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        DWORD chunk = n > (1u << 30) ? (1u << 30) : (DWORD)n, put = 0;
        if (!WriteFile(g_out, p, chunk, &put, NULL) || put == 0) ExitProcess(3);
        p += put;
        n -= put;
    }
}

static void reply_header(UINT32 command, UINT64 length)
{
    UINT32 head[2] = {MAGIC_REPLY, command};
    write_exact(head, sizeof head);
    write_exact(&length, sizeof length);
}

static double now_ms(void)
{
    static LARGE_INTEGER freq;
    LARGE_INTEGER t;
    if (!freq.QuadPart) QueryPerformanceFrequency(&freq);
    QueryPerformanceCounter(&t);
    return (double)t.QuadPart * 1000.0 / (double)freq.QuadPart;
}

/* A cursor over a request payload that refuses to read past its end. */
typedef struct { const unsigned char *p, *end; int ok; } Cursor;

static const void *take(Cursor *c, UINT64 n)
{
    if (!c->ok || (UINT64)(c->end - c->p) < n) { c->ok = 0; return NULL; }
    const void *at = c->p;
    c->p += n;
    return at;
}
static UINT32 take_u32(Cursor *c) { const UINT32 *v = take(c, 4); return v ? *v : 0; }
static UINT64 take_u64(Cursor *c) { UINT64 v = 0; const void *p = take(c, 8); if (p) memcpy(&v, p, 8); return v; }

/* ---------------------------------------------------------------------------------------- */
/* D3D12 helpers                                                                              */

static ID3D12Resource *make_buffer(D3D12_HEAP_TYPE heap, UINT64 size, D3D12_RESOURCE_STATES state, HRESULT *hr)
{
    D3D12_HEAP_PROPERTIES props = {0};
    D3D12_RESOURCE_DESC desc = {0};
    ID3D12Resource *res = NULL;
    props.Type = heap;
    desc.Dimension = D3D12_RESOURCE_DIMENSION_BUFFER;
    desc.Width = size ? size : 4;
    desc.Height = desc.DepthOrArraySize = desc.MipLevels = 1;
    desc.SampleDesc.Count = 1;
    desc.Layout = D3D12_TEXTURE_LAYOUT_ROW_MAJOR;
    desc.Flags = heap == D3D12_HEAP_TYPE_DEFAULT ? D3D12_RESOURCE_FLAG_ALLOW_UNORDERED_ACCESS : D3D12_RESOURCE_FLAG_NONE;
    *hr = ID3D12Device_CreateCommittedResource(g_d3d, &props, D3D12_HEAP_FLAG_NONE, &desc, state, NULL,
                                               &IID_ID3D12Resource, (void **)&res);
    return SUCCEEDED(*hr) ? res : NULL;
}

static void transition(ID3D12Resource *res, D3D12_RESOURCE_STATES from, D3D12_RESOURCE_STATES to)
{
    D3D12_RESOURCE_BARRIER b = {0};
    b.Type = D3D12_RESOURCE_BARRIER_TYPE_TRANSITION;
    b.Transition.pResource = res;
    b.Transition.Subresource = D3D12_RESOURCE_BARRIER_ALL_SUBRESOURCES;
    b.Transition.StateBefore = from;
    b.Transition.StateAfter = to;
    ID3D12GraphicsCommandList_ResourceBarrier(g_list, 1, &b);
}

static void uav_barrier(void)
{
    D3D12_RESOURCE_BARRIER b = {0};
    b.Type = D3D12_RESOURCE_BARRIER_TYPE_UAV;
    ID3D12GraphicsCommandList_ResourceBarrier(g_list, 1, &b);
}

static HRESULT submit_and_wait(void)
{
    HRESULT hr = ID3D12GraphicsCommandList_Close(g_list);
    if (FAILED(hr)) return hr;
    ID3D12CommandList *lists[1] = {(ID3D12CommandList *)g_list};
    ID3D12CommandQueue_ExecuteCommandLists(g_queue, 1, lists);
    hr = ID3D12CommandQueue_Signal(g_queue, g_fence, ++g_fence_value);
    if (FAILED(hr)) return hr;
    if (ID3D12Fence_GetCompletedValue(g_fence) < g_fence_value) {
        ID3D12Fence_SetEventOnCompletion(g_fence, g_fence_value, g_event);
        WaitForSingleObject(g_event, INFINITE);
    }
    return S_OK;
}

static void release(void *unknown)
{
    if (unknown) IUnknown_Release((IUnknown *)unknown);
}

/* ---------------------------------------------------------------------------------------- */
/* WaveOps as DirectML sees it                                                               */

#define WAVE_OPS_DEVICE (-1) /* no --wave-ops: the device's own answer, untouched */
#define WAVE_OPS_OFF 0
#define MAX_WAVE_LANES 128u /* D3D12: a wave has 4 to 128 lanes */
#define CHECK_FEATURE_SUPPORT_SLOT 13

typedef HRESULT(STDMETHODCALLTYPE *CheckFeatureSupportFn)(ID3D12Device *, D3D12_FEATURE, void *, UINT);

static int g_wave_lanes = WAVE_OPS_DEVICE;             /* WAVE_OPS_OFF, or the lanes to report */
static CheckFeatureSupportFn g_device_check_feature;    /* the device's own CheckFeatureSupport */

/* The vtable slot the wrapper replaces must be CheckFeatureSupport's: the design measured slot 13. */
typedef char check_feature_support_is_slot_13[
    offsetof(ID3D12DeviceVtbl, CheckFeatureSupport) == CHECK_FEATURE_SUPPORT_SLOT * sizeof(void *) ? 1 : -1];

/* Every feature passes through; OPTIONS1 gets the WaveOps answer --wave-ops asked for. Why this
 * and not a fake device object: DirectML queries the device for ID3D12Device1..5 and vkd3d's
 * functions take the device back, so only the real object with one edited answer is safe. */
static HRESULT STDMETHODCALLTYPE check_feature_support(ID3D12Device *self, D3D12_FEATURE feature, void *data, UINT size)
{
    HRESULT hr = g_device_check_feature(self, feature, data, size);
    if (FAILED(hr) || feature != D3D12_FEATURE_D3D12_OPTIONS1 || !data ||
        size != sizeof(D3D12_FEATURE_DATA_D3D12_OPTIONS1))
        return hr;
    D3D12_FEATURE_DATA_D3D12_OPTIONS1 *o = data;
    if (g_wave_lanes == WAVE_OPS_OFF) {
        o->WaveOps = FALSE;
        return hr;
    }
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    UINT lanes = (UINT)g_wave_lanes, cores = si.dwNumberOfProcessors ? si.dwNumberOfProcessors : 1;
    o->WaveOps = TRUE;
    o->WaveLaneCountMin = o->WaveLaneCountMax = lanes;
    /* lavapipe runs waves on CPU threads: one wave in flight per core is the honest total */
    if (o->TotalLaneCount < lanes * cores) o->TotalLaneCount = lanes * cores;
    return hr;
}

/* Put check_feature_support into g_d3d's vtable (before DirectML sees the device). The vtable
 * is the driver's read-only data, shared by every device of the process (the runner makes one). */
static void install_wave_ops(void)
{
    void **slot = (void **)g_d3d->lpVtbl + CHECK_FEATURE_SUPPORT_SLOT;
    DWORD was, ignored;
    g_device_check_feature = (CheckFeatureSupportFn)*slot;
    if (g_wave_lanes == WAVE_OPS_DEVICE) return;
    if (!VirtualProtect(slot, sizeof *slot, PAGE_EXECUTE_READWRITE, &was))
        die("VirtualProtect(ID3D12Device vtable) for --wave-ops", HRESULT_FROM_WIN32(GetLastError()));
    *slot = (void *)check_feature_support;
    VirtualProtect(slot, sizeof *slot, was, &ignored);
}

/* --wave-ops=off or --wave-ops=LANES (4..128, a power of two); 0 on a malformed value. */
static int parse_wave_ops(const wchar_t *arg)
{
    static const wchar_t prefix[] = L"--wave-ops=";
    size_t n = wcslen(prefix);
    if (wcsncmp(arg, prefix, n) != 0) return 0;
    if (wcscmp(arg + n, L"off") == 0) { g_wave_lanes = WAVE_OPS_OFF; return 1; }
    wchar_t *end = NULL;
    unsigned long lanes = wcstoul(arg + n, &end, 10);
    if (end == arg + n || *end || lanes < 4 || lanes > MAX_WAVE_LANES || (lanes & (lanes - 1))) return 0;
    g_wave_lanes = (int)lanes;
    return 1;
}

/* OPTIONS1 through `fn` as "PREFIXwave_ops=..\\n..." lines; returns the characters written. */
static int describe_waves(char *text, size_t room, const char *prefix, CheckFeatureSupportFn fn)
{
    D3D12_FEATURE_DATA_D3D12_OPTIONS1 o;
    memset(&o, 0, sizeof o);
    if (FAILED(fn(g_d3d, D3D12_FEATURE_D3D12_OPTIONS1, &o, sizeof o)))
        return snprintf(text, room, "%swave_ops=unknown\n", prefix);
    return snprintf(text, room, "%swave_ops=%d\n%swave_lanes_min=%u\n%swave_lanes_max=%u\n%stotal_lanes=%u\n",
                    prefix, o.WaveOps ? 1 : 0, prefix, o.WaveLaneCountMin, prefix, o.WaveLaneCountMax,
                    prefix, o.TotalLaneCount);
}

/* ---------------------------------------------------------------------------------------- */

static void setup(const wchar_t *dll_path)
{
    HRESULT hr;
    IDXGIFactory4 *factory = NULL;
    IDXGIAdapter1 *adapter = NULL;
    if (SUCCEEDED(CreateDXGIFactory1(&IID_IDXGIFactory4, (void **)&factory))) {
        /* IDXGIFactory4::EnumWarpAdapter is a stub in Wine 8.0: take the default adapter. */
        if (SUCCEEDED(IDXGIFactory4_EnumAdapters1(factory, 0, &adapter))) {
            DXGI_ADAPTER_DESC1 d;
            if (SUCCEEDED(IDXGIAdapter1_GetDesc1(adapter, &d)))
                snprintf(g_adapter, sizeof g_adapter, "%ls (vendor 0x%04x, device 0x%04x)", d.Description,
                         d.VendorId, d.DeviceId);
        }
    }
    hr = D3D12CreateDevice((IUnknown *)adapter, D3D_FEATURE_LEVEL_11_0, &IID_ID3D12Device, (void **)&g_d3d);
    if (FAILED(hr)) die("D3D12CreateDevice", hr);
    install_wave_ops(); /* DirectML reads OPTIONS1 when its device is created */
    release(adapter);
    release(factory);

    HMODULE dml = LoadLibraryW(dll_path);
    if (!dml) die("LoadLibrary(DirectML.dll)", HRESULT_FROM_WIN32(GetLastError()));
    DMLCreateDevice1Fn create1 = (DMLCreateDevice1Fn)(void *)GetProcAddress(dml, "DMLCreateDevice1");
    DMLCreateDeviceFn create0 = (DMLCreateDeviceFn)(void *)GetProcAddress(dml, "DMLCreateDevice");
    if (create1) hr = create1(g_d3d, 0, 0x1000, &IID_IDMLDevice_, (void **)&g_dml);
    else if (create0) hr = create0(g_d3d, 0, &IID_IDMLDevice_, (void **)&g_dml);
    else hr = E_NOINTERFACE;
    if (FAILED(hr)) die("DMLCreateDevice", hr);

    D3D12_COMMAND_QUEUE_DESC qd = {0};
    qd.Type = D3D12_COMMAND_LIST_TYPE_DIRECT;
    if (FAILED(hr = ID3D12Device_CreateCommandQueue(g_d3d, &qd, &IID_ID3D12CommandQueue, (void **)&g_queue)))
        die("CreateCommandQueue", hr);
    if (FAILED(hr = ID3D12Device_CreateCommandAllocator(g_d3d, D3D12_COMMAND_LIST_TYPE_DIRECT,
                                                          &IID_ID3D12CommandAllocator, (void **)&g_alloc)))
        die("CreateCommandAllocator", hr);
    if (FAILED(hr = ID3D12Device_CreateCommandList(g_d3d, 0, D3D12_COMMAND_LIST_TYPE_DIRECT, g_alloc, NULL,
                                                     &IID_ID3D12GraphicsCommandList, (void **)&g_list)))
        die("CreateCommandList", hr);
    ID3D12GraphicsCommandList_Close(g_list);
    if (FAILED(hr = ID3D12Device_CreateFence(g_d3d, 0, D3D12_FENCE_FLAG_NONE, &IID_ID3D12Fence, (void **)&g_fence)))
        die("CreateFence", hr);
    g_event = CreateEventW(NULL, FALSE, FALSE, NULL);
    if (FAILED(hr = g_dml->lpVtbl->CreateCommandRecorder(g_dml, &IID_IDMLCommandRecorder_, (void **)&g_recorder)))
        die("CreateCommandRecorder", hr);
}

static void do_info(Cursor *c)
{
    char text[2048];
    int n = 0;
    UINT32 level_count = take_u32(c);
    const UINT32 *levels = take(c, 4ull * level_count);
    UINT32 type_count = take_u32(c);
    const UINT32 *types = take(c, 4ull * type_count);
    UINT32 max_level = 0;
    /* Query one level at a time, highest first: a release that does not know a level may
     * refuse the whole list. */
    for (UINT32 i = 0; c->ok && i < level_count && !max_level; i++) {
        DML_FEATURE_QUERY_FEATURE_LEVELS q = {1, &levels[i]};
        DML_FEATURE_DATA_FEATURE_LEVELS d = {0};
        if (SUCCEEDED(g_dml->lpVtbl->CheckFeatureSupport(g_dml, DML_FEATURE_FEATURE_LEVELS, sizeof q, &q, sizeof d, &d)) &&
            d.MaxSupportedFeatureLevel == levels[i])
            max_level = levels[i];
    }
    n += snprintf(text + n, sizeof text - n, "adapter=%s\nmax_feature_level=0x%x\n", g_adapter, max_level);
    for (UINT32 i = 0; c->ok && i < type_count; i++) {
        DML_FEATURE_QUERY_TENSOR_DATA_TYPE_SUPPORT q = {types[i]};
        DML_FEATURE_DATA_TENSOR_DATA_TYPE_SUPPORT d = {0};
        HRESULT hr = g_dml->lpVtbl->CheckFeatureSupport(g_dml, DML_FEATURE_TENSOR_DATA_TYPE_SUPPORT, sizeof q, &q, sizeof d, &d);
        n += snprintf(text + n, sizeof text - n, "data_type_%u=%d\n", types[i], SUCCEEDED(hr) && d.IsSupported);
    }
    n += describe_waves(text + n, sizeof text - n, "", g_d3d->lpVtbl->CheckFeatureSupport);
    n += describe_waves(text + n, sizeof text - n, "device_", g_device_check_feature);
    reply_header(CMD_INFO, (UINT64)n);
    write_exact(text, (size_t)n);
}

typedef struct {
    UINT32 stage;
    HRESULT hr;
    double ms[5];
    UINT32 output_count;
    UINT64 output_size[64];
    UINT64 output_offset[64];
    const unsigned char *readback;
} RunResult;

static void send_run_result(const RunResult *r)
{
    UINT64 length = 4 + 4 + 8 * 5 + 4;
    for (UINT32 i = 0; i < r->output_count; i++)
        length += 8 + (r->output_size[i] == NO_BINDING || !r->readback ? 0 : r->output_size[i]);
    reply_header(CMD_RUN, length);
    write_exact(&r->stage, 4);
    write_exact(&r->hr, 4);
    write_exact(r->ms, sizeof r->ms);
    write_exact(&r->output_count, 4);
    for (UINT32 i = 0; i < r->output_count; i++) {
        UINT64 size = r->output_size[i] == NO_BINDING || !r->readback ? 0 : r->output_size[i];
        write_exact(&size, 8);
        if (size) write_exact(r->readback + r->output_offset[i], (size_t)size);
    }
}

static UINT64 align_up(UINT64 v, UINT64 a) { return (v + a - 1) / a * a; }

static void do_run(Cursor *c)
{
    RunResult r;
    memset(&r, 0, sizeof r);
    UINT32 mode = take_u32(c), flags = take_u32(c);
    UINT64 arena_len = take_u64(c);
    unsigned char *arena = NULL;
    const void *arena_src = take(c, arena_len);
    UINT32 reloc_count = take_u32(c);
    const unsigned char *relocs = take(c, 8ull * reloc_count);
    UINT32 input_count = take_u32(c);
    UINT64 input_size[64], input_offset[64];
    UINT32 input_owned[64], owned_count = 0;
    const unsigned char *input_data[64];
    UINT64 total = 0;
    if (input_count > 64) c->ok = 0;
    for (UINT32 i = 0; c->ok && i < input_count; i++) {
        input_size[i] = take_u64(c);
        input_owned[i] = take_u32(c);
        owned_count += input_owned[i] != 0;
        input_data[i] = NULL;
        if (input_size[i] != NO_BINDING) {
            if (input_size[i] > MAX_BUFFER) c->ok = 0;
            input_data[i] = take(c, input_size[i]);
            input_offset[i] = total;
            total = align_up(total + input_size[i], TENSOR_ALIGNMENT);
        }
    }
    r.output_count = take_u32(c);
    if (r.output_count > 64) { c->ok = 0; r.output_count = 0; }
    UINT64 outputs_begin = total;
    for (UINT32 i = 0; c->ok && i < r.output_count; i++) {
        r.output_size[i] = take_u64(c);
        if (r.output_size[i] != NO_BINDING && r.output_size[i] > MAX_BUFFER) c->ok = 0;
        if (c->ok && r.output_size[i] != NO_BINDING) {
            r.output_offset[i] = total;
            total = align_up(total + r.output_size[i], TENSOR_ALIGNMENT);
        }
    }
    if (!c->ok || arena_len < sizeof(DML_OPERATOR_DESC) || (arena = malloc(arena_len)) == NULL) {
        r.stage = STAGE_BAD_REQUEST;
        r.output_count = 0;
        send_run_result(&r);
        return;
    }
    memcpy(arena, arena_src, arena_len);
    for (UINT32 i = 0; i < reloc_count; i++) {
        UINT64 at, target;
        memcpy(&at, relocs + 8ull * i, 8);
        if (arena_len < 8 || at > arena_len - 8) { r.stage = STAGE_BAD_REQUEST; goto done; }
        memcpy(&target, arena + at, 8);
        if (target >= arena_len) { r.stage = STAGE_BAD_REQUEST; goto done; }
        unsigned char *ptr = arena + target;
        memcpy(arena + at, &ptr, 8);
    }

    IDMLOperator *op = NULL;
    IDMLCompiledOperator *compiled = NULL;
    IDMLOperatorInitializer *init = NULL;
    IDMLBindingTable *table = NULL;
    ID3D12DescriptorHeap *heap = NULL;
    ID3D12Resource *upload = NULL, *tensors = NULL, *readback = NULL, *temp = NULL, *persistent = NULL;
    double t0 = now_ms();

    r.stage = STAGE_CREATE;
    r.hr = g_dml->lpVtbl->CreateOperator(g_dml, (const DML_OPERATOR_DESC *)arena, &IID_IDMLOperator_, (void **)&op);
    r.ms[0] = now_ms() - t0;
    if (FAILED(r.hr)) goto finish;
    if (mode == MODE_CREATE) { r.stage = STAGE_OK; goto finish; }

    t0 = now_ms();
    r.stage = STAGE_COMPILE;
    r.hr = g_dml->lpVtbl->CompileOperator(g_dml, op, flags, &IID_IDMLCompiledOperator_, (void **)&compiled);
    r.ms[1] = now_ms() - t0;
    if (FAILED(r.hr)) goto finish;
    if (mode == MODE_COMPILE) { r.stage = STAGE_OK; goto finish; }

    t0 = now_ms();
    r.stage = STAGE_INITIALIZE;
    r.hr = g_dml->lpVtbl->CreateOperatorInitializer(g_dml, 1, &compiled, &IID_IDMLOperatorInitializer_, (void **)&init);
    if (FAILED(r.hr)) goto finish;
    DML_BINDING_PROPERTIES ip, ep;
    init->lpVtbl->GetBindingProperties((IDMLDispatchable *)init, &ip);
    compiled->lpVtbl->GetBindingProperties((IDMLDispatchable *)compiled, &ep);
    /* The initializer and the operator get separate descriptor ranges: descriptors are read
     * when the command list executes, after both dispatches were recorded. */
    UINT descriptors = ip.RequiredDescriptorCount + ep.RequiredDescriptorCount;
    D3D12_DESCRIPTOR_HEAP_DESC hd = {0};
    hd.Type = D3D12_DESCRIPTOR_HEAP_TYPE_CBV_SRV_UAV;
    hd.NumDescriptors = descriptors ? descriptors : 1;
    hd.Flags = D3D12_DESCRIPTOR_HEAP_FLAG_SHADER_VISIBLE;
    if (FAILED(r.hr = ID3D12Device_CreateDescriptorHeap(g_d3d, &hd, &IID_ID3D12DescriptorHeap, (void **)&heap))) goto finish;
    UINT increment = ID3D12Device_GetDescriptorHandleIncrementSize(g_d3d, D3D12_DESCRIPTOR_HEAP_TYPE_CBV_SRV_UAV);
    D3D12_CPU_DESCRIPTOR_HANDLE cpu;
    D3D12_GPU_DESCRIPTOR_HANDLE gpu;
    heap->lpVtbl->GetCPUDescriptorHandleForHeapStart(heap, &cpu); /* aggregate return: hidden pointer */
    heap->lpVtbl->GetGPUDescriptorHandleForHeapStart(heap, &gpu);

    UINT64 temp_size = ip.TemporaryResourceSize > ep.TemporaryResourceSize ? ip.TemporaryResourceSize : ep.TemporaryResourceSize;
    UINT64 buffer_size = total ? total : TENSOR_ALIGNMENT;
    r.stage = STAGE_OUT_OF_MEMORY;
    if (!(upload = make_buffer(D3D12_HEAP_TYPE_UPLOAD, buffer_size, D3D12_RESOURCE_STATE_GENERIC_READ, &r.hr))) goto finish;
    if (!(tensors = make_buffer(D3D12_HEAP_TYPE_DEFAULT, buffer_size, D3D12_RESOURCE_STATE_COPY_DEST, &r.hr))) goto finish;
    if (!(readback = make_buffer(D3D12_HEAP_TYPE_READBACK, buffer_size, D3D12_RESOURCE_STATE_COPY_DEST, &r.hr))) goto finish;
    if (temp_size && !(temp = make_buffer(D3D12_HEAP_TYPE_DEFAULT, temp_size, D3D12_RESOURCE_STATE_UNORDERED_ACCESS, &r.hr))) goto finish;
    if (ep.PersistentResourceSize &&
        !(persistent = make_buffer(D3D12_HEAP_TYPE_DEFAULT, ep.PersistentResourceSize, D3D12_RESOURCE_STATE_UNORDERED_ACCESS, &r.hr)))
        goto finish;
    r.stage = STAGE_INITIALIZE;

    unsigned char *mapped = NULL;
    D3D12_RANGE none = {0, 0};
    if (FAILED(r.hr = ID3D12Resource_Map(upload, 0, &none, (void **)&mapped))) goto finish;
    memset(mapped + outputs_begin, 0xFF, (size_t)(buffer_size - outputs_begin));
    for (UINT32 i = 0; i < input_count; i++)
        if (input_size[i] != NO_BINDING) memcpy(mapped + input_offset[i], input_data[i], (size_t)input_size[i]);
    ID3D12Resource_Unmap(upload, 0, NULL);

    if (FAILED(r.hr = ID3D12CommandAllocator_Reset(g_alloc))) goto finish;
    if (FAILED(r.hr = ID3D12GraphicsCommandList_Reset(g_list, g_alloc, NULL))) goto finish;
    ID3D12GraphicsCommandList_CopyBufferRegion(g_list, tensors, 0, upload, 0, buffer_size);
    transition(tensors, D3D12_RESOURCE_STATE_COPY_DEST, D3D12_RESOURCE_STATE_UNORDERED_ACCESS);
    ID3D12GraphicsCommandList_SetDescriptorHeaps(g_list, 1, &heap);

    DML_BINDING_TABLE_DESC td = {(IDMLDispatchable *)init, cpu, gpu, ip.RequiredDescriptorCount};
    if (FAILED(r.hr = g_dml->lpVtbl->CreateBindingTable(g_dml, &td, &IID_IDMLBindingTable_, (void **)&table))) goto finish;
    DML_BUFFER_BINDING temp_buffer = {temp, 0, temp_size}, persistent_buffer = {persistent, 0, ep.PersistentResourceSize};
    DML_BINDING_DESC temp_binding = {DML_BINDING_TYPE_BUFFER, &temp_buffer};
    DML_BINDING_DESC persistent_binding = {DML_BINDING_TYPE_BUFFER, &persistent_buffer};
    DML_BUFFER_BINDING in_buffers[64], out_buffers[64];
    DML_BINDING_DESC in_bindings[64], out_bindings[64];
    if (owned_count) {
        /* DML-owned inputs go to the initializer as one buffer array over every input, the
         * others left null (DML_BUFFER_ARRAY_BINDING). */
        for (UINT32 i = 0; i < input_count; i++)
            in_buffers[i] = input_owned[i] && input_size[i] != NO_BINDING
                                ? (DML_BUFFER_BINDING){tensors, input_offset[i], input_size[i]}
                                : (DML_BUFFER_BINDING){NULL, 0, 0};
        struct { UINT BindingCount; const DML_BUFFER_BINDING *Bindings; } array = {input_count, in_buffers};
        DML_BINDING_DESC array_binding = {DML_BINDING_TYPE_BUFFER_ARRAY, &array};
        table->lpVtbl->BindInputs(table, 1, &array_binding);
    }
    if (ip.TemporaryResourceSize) table->lpVtbl->BindTemporaryResource(table, &temp_binding);
    if (persistent) table->lpVtbl->BindOutputs(table, 1, &persistent_binding);
    g_recorder->lpVtbl->RecordDispatch(g_recorder, (ID3D12CommandList *)g_list, (IDMLDispatchable *)init, table);
    uav_barrier();
    r.ms[2] = now_ms() - t0;

    t0 = now_ms();
    r.stage = STAGE_EXECUTE;
    td.Dispatchable = (IDMLDispatchable *)compiled;
    td.CPUDescriptorHandle.ptr = cpu.ptr + (SIZE_T)increment * ip.RequiredDescriptorCount;
    td.GPUDescriptorHandle.ptr = gpu.ptr + (UINT64)increment * ip.RequiredDescriptorCount;
    td.SizeInDescriptors = ep.RequiredDescriptorCount;
    if (FAILED(r.hr = table->lpVtbl->Reset(table, &td))) goto finish;
    for (UINT32 i = 0; i < input_count; i++) {
        int bound = input_size[i] != NO_BINDING && !input_owned[i];
        in_buffers[i] = (DML_BUFFER_BINDING){tensors, input_offset[i], input_size[i]};
        in_bindings[i] = (DML_BINDING_DESC){bound ? DML_BINDING_TYPE_BUFFER : DML_BINDING_TYPE_NONE,
                                            bound ? &in_buffers[i] : NULL};
    }
    for (UINT32 i = 0; i < r.output_count; i++) {
        out_buffers[i] = (DML_BUFFER_BINDING){tensors, r.output_offset[i], r.output_size[i]};
        out_bindings[i] = (DML_BINDING_DESC){r.output_size[i] == NO_BINDING ? DML_BINDING_TYPE_NONE : DML_BINDING_TYPE_BUFFER,
                                             r.output_size[i] == NO_BINDING ? NULL : &out_buffers[i]};
    }
    table->lpVtbl->BindInputs(table, input_count, in_bindings);
    table->lpVtbl->BindOutputs(table, r.output_count, out_bindings);
    if (ep.TemporaryResourceSize) table->lpVtbl->BindTemporaryResource(table, &temp_binding);
    if (persistent) table->lpVtbl->BindPersistentResource(table, &persistent_binding);
    g_recorder->lpVtbl->RecordDispatch(g_recorder, (ID3D12CommandList *)g_list, (IDMLDispatchable *)compiled, table);
    uav_barrier();
    transition(tensors, D3D12_RESOURCE_STATE_UNORDERED_ACCESS, D3D12_RESOURCE_STATE_COPY_SOURCE);
    ID3D12GraphicsCommandList_CopyBufferRegion(g_list, readback, 0, tensors, 0, buffer_size);
    if (FAILED(r.hr = submit_and_wait())) goto finish;
    r.ms[3] = now_ms() - t0;

    HRESULT removed = g_dml->lpVtbl->GetDeviceRemovedReason(g_dml);
    if (FAILED(removed)) { r.stage = STAGE_DEVICE_REMOVED; r.hr = removed; goto finish; }
    removed = ID3D12Device_GetDeviceRemovedReason(g_d3d);
    if (FAILED(removed)) { r.stage = STAGE_DEVICE_REMOVED; r.hr = removed; goto finish; }

    t0 = now_ms();
    D3D12_RANGE all = {0, (SIZE_T)buffer_size};
    if (FAILED(r.hr = ID3D12Resource_Map(readback, 0, &all, (void **)&mapped))) goto finish;
    r.readback = mapped;
    r.stage = STAGE_OK;
    r.ms[4] = now_ms() - t0;

finish:
    if (r.stage != STAGE_OK || mode != MODE_EXECUTE) r.readback = NULL; /* then no data, just how far it got */
    send_run_result(&r);
    if (r.readback) ID3D12Resource_Unmap(readback, 0, NULL);
    release(table);
    release(heap);
    release(upload);
    release(tensors);
    release(readback);
    release(temp);
    release(persistent);
    release(init);
    release(compiled);
    release(op);
done:
    if (r.stage == STAGE_BAD_REQUEST) { r.output_count = 0; send_run_result(&r); }
    free(arena);
    if (r.stage == STAGE_DEVICE_REMOVED) ExitProcess(4);
}

int wmain(int argc, wchar_t **argv)
{
    if (argc < 2 || argc > 3 || (argc == 3 && !parse_wave_ops(argv[2]))) {
        fprintf(stderr, "usage: runner.exe PATH\\TO\\DirectML.dll [--wave-ops=off|LANES (4..128, a power of two)]\n");
        return 2;
    }
    g_in = GetStdHandle(STD_INPUT_HANDLE);
    g_out = GetStdHandle(STD_OUTPUT_HANDLE);
    setup(argv[1]);
    for (;;) {
        UINT32 head[2];
        UINT64 length;
        if (!read_exact(head, sizeof head) || !read_exact(&length, sizeof length)) return 0;
        if (head[0] != MAGIC_REQUEST) {
            fprintf(stderr, "dmlconform runner: bad request magic 0x%08x\n", head[0]);
            return 2;
        }
        unsigned char *payload = length ? malloc(length) : NULL;
        if (length && (!payload || !read_exact(payload, length))) return 2;
        Cursor c = {payload, payload + length, 1};
        switch (head[1]) {
        case CMD_INFO: do_info(&c); break;
        case CMD_RUN: do_run(&c); break;
        case CMD_SLEEP: Sleep(take_u32(&c)); reply_header(CMD_SLEEP, 0); break;
        case CMD_CRASH: *(volatile int *)(uintptr_t)take_u32(&c) = 1; break; /* address 0: an access violation */
        case CMD_QUIT: reply_header(CMD_QUIT, 0); free(payload); return 0;
        default: snprintf(g_error, sizeof g_error, "unknown command %u", head[1]); reply_header(head[1], 0); break;
        }
        free(payload);
    }
}
